// Writes nccl-tests' JSON schema (version 2). Its quirks are kept on purpose so a reader of
// nccl-tests files needs no special case: booleans are the strings "true"/"false", "root" is the
// table's right-aligned text ("    -1"), doubles have six decimals, #wrong is a double.
#include "bench_comm_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "kiln/io/json.hpp"

namespace kiln::cli {
namespace {

std::string number(double v) { return std::isfinite(v) ? fmt::format("{:.6f}", v) : std::string("\"nan\""); }

std::string half(const BenchJsonHalf& h) {
  return fmt::format("{{\"time\":{},\"alg_bw\":{},\"bus_bw\":{},\"nwrong\":{}}}", number(h.time_us), number(h.alg_bw),
                     number(h.bus_bw), h.wrong < 0 ? std::string("null") : number(static_cast<double>(h.wrong)));
}

std::string string_list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + io::json_quoted(v[i]);
  return out + "]";
}

}  // namespace

std::string bench_json_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::vector<std::string> bench_json_env(char** envp) {
  static const char* const prefixes[] = {"NCCL_", "KILN_", "GLOO_", "OMPI_", "PMIX_", "UCX_", "CUDA_VISIBLE_DEVICES="};
  static const char* const names[] = {"MASTER_ADDR", "MASTER_PORT", "RANK",       "WORLD_SIZE",
                                      "LOCAL_RANK",  "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"};
  std::vector<std::string> out;
  for (char** e = envp; e && *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool keep = std::any_of(std::begin(prefixes), std::end(prefixes),
                            [&](const char* p) { return kv.rfind(p, 0) == 0; }) ||
                std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
    if (keep) out.push_back(kv);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string bench_json_text(const BenchJsonReport& r) {
  std::string out = "{\"version\":2";
  out += ",\"start_time\":" + io::json_quoted(r.start_time);
  out += ",\"args\":" + string_list(r.args);
  out += ",\"env\":" + string_list(r.env);
  out += ",\"nccl_version\":null";  // no NCCL library is involved in general; the comm is under "kiln"
  out += fmt::format(",\"config\":{{\"nthreads\":1,\"ngpus\":1,\"minimum_bytes\":{},\"maximum_bytes\":{}", r.min_bytes,
                     r.max_bytes);
  out += r.step_factor > 1 ? fmt::format(",\"step_factor\":{}", r.step_factor)
                           : fmt::format(",\"step_bytes\":{}", r.step_bytes);
  out += fmt::format(",\"warmup_iters\":{},\"iterations\":{},\"aggregated_iterations\":1,\"validation\":{},\"graph\":0"
                     ",\"blocking_collectives\":\"true\",\"per_iter_timing\":\"false\",\"parallel_init\":\"false\"",
                     r.warmup_iters, r.iters, r.check);
  out += ",\"devices\":[";
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    const auto& d = r.devices[i];
    out += fmt::format("{}{{\"rank\":{},\"group\":0,\"pid\":{},\"hostname\":{},\"device\":{},\"device_hex\":{},"
                       "\"device_info\":{}}}",
                       i ? "," : "", d.rank, d.pid, io::json_quoted(d.hostname), d.device, io::json_quoted(d.device_hex),
                       io::json_quoted(d.device_info));
  }
  out += "]}";
  out += ",\"results\":[";
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    const auto& row = r.results[i];
    out += fmt::format("{}{{\"size\":{},\"count\":{},\"type\":{},\"redop\":{},\"root\":\"{:6}\",\"out_of_place\":{},"
                       "\"in_place\":{},\"actual_iterations\":{},\"experiment_name\":\"\"}}",
                       i ? "," : "", row.size, row.count, io::json_quoted(r.type), io::json_quoted(r.redop), -1, half(row.out_of_place),
                       half(row.in_place), r.iters);
  }
  out += "]";
  out += fmt::format(",\"out_of_bounds\":{{\"count\":{},\"okay\":\"{}\"}}", r.wrong_total,
                     r.wrong_total == 0 ? "true" : "false");
  out += ",\"average_bus_bandwidth\":{\"bandwidth\":" + number(r.avg_bus_bw) + ",\"okay\":\"unchecked\"}";
  out += ",\"errors\":[]";
  out += fmt::format(",\"kiln\":{{\"collective\":\"all_reduce\",\"comm\":{},\"comm_describe\":{},\"backend\":{},"
                     "\"world_size\":{},\"ranks_from\":{}}}",
                     io::json_quoted(r.comm), io::json_quoted(r.comm_describe), io::json_quoted(r.backend), r.world_size, io::json_quoted(r.ranks_from));
  out += ",\"end_time\":" + io::json_quoted(r.end_time);
  return out + "}";
}

}  // namespace kiln::cli
