// `kiln bench-comm` (see bench_comm_command.hpp). Decisions a reader must know:
// - The Communicator contract has an in-place all_reduce only, so "out-of-place" copies the
//   input into the output buffer and reduces the output in place; its time includes that copy.
//   The header says so.
// - Each collective is waited for (Work::wait) before the next is issued, like nccl-tests -z 1;
//   ranks meet at a barrier before each timed loop; the time is the mean over ranks (-a 1).
// - Checking (#wrong) uses the values of bench_comm_check.hpp.
#include "bench_comm_command.hpp"
#include "bench_comm_check.hpp"
#include "bench_comm_json.hpp"
#include "option_args.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "kiln/config/config.hpp"
#include "kiln/dist/launcher_rendezvous.hpp"
#include "kiln/dist/reduce_op_name.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/dist/wait_reporting_store.hpp"
#include "kiln/errors.hpp"
#include "kiln/launch/ranks.hpp"
#include "kiln/launch/supervisor.hpp"
#include "kiln/sdk_internal/log_setup.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/store.hpp"

namespace kiln::cli {
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::int64_t min_bytes = 32 << 20;
  std::int64_t max_bytes = 32 << 20;
  std::int64_t step_factor = 0;  // 0: step by step_bytes
  std::int64_t step_bytes = 1 << 20;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  DType dtype = DType::f32;
  std::string dtype_label = "float";
  ReduceOp op = ReduceOp::sum;
  std::string comm;
  std::string backend = "cpu";
  std::vector<std::string> sets;
  bool json = false;
  std::string json_file;  // -J: also write the JSON report here
  std::chrono::milliseconds timeout{300000};
  std::chrono::milliseconds warn_after{60000};  // --warn-after: rendezvous progress warnings
};

/// One half of a row (out-of-place or in-place), averaged over ranks.
struct Half {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  std::int64_t wrong = 0;
};

struct Row {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  Half out_of_place, in_place;
};

DType parse_dtype(const std::string& s, std::string& label) {
  if (s == "float" || s == "float32" || s == "f32" || s == "fp32") { label = "float"; return DType::f32; }
  if (s == "half" || s == "float16" || s == "f16" || s == "fp16") { label = "half"; return DType::f16; }
  if (s == "bfloat16" || s == "bf16") { label = "bfloat16"; return DType::bf16; }
  if (s == "double" || s == "float64" || s == "f64" || s == "fp64") { label = "double"; return DType::f64; }
  throw ConfigError(fmt::format("-d/--datatype '{}' is not one of float, half, bfloat16, double", s));
}

ReduceOp parse_op(const std::string& s) {
  if (const auto op = dist::reduce_op_named(s)) return *op;
  throw ConfigError(fmt::format("-o/--op '{}' is not one of sum, avg, max, min (prod and all are not offered: the "
                                "Communicator interface has no product)",
                                s));
}

/// The byte sizes to run, as nccl-tests walks them.
std::vector<std::int64_t> sizes_of(const BenchOptions& o) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t s = o.min_bytes; s <= o.max_bytes;) {
    sizes.push_back(s);
    const std::int64_t next = o.step_factor > 1 ? s * o.step_factor : s + o.step_bytes;
    if (next <= s) break;
    s = next;
  }
  return sizes;
}

/// The parts of one benchmark run. Declaration order makes destruction order: buffers, then
/// the communicator, then the store and backend it was connected with (they must outlive it).
struct Bench {
  BenchOptions o;
  RankInfo ranks;
  std::shared_ptr<Backend> backend;
  std::unique_ptr<Store> store;
  std::unique_ptr<Store> meeting;  // `store`, saying every warn_after whom it waits for
  std::unique_ptr<dist::CleanOnFailureStore> start_store;  // `meeting`, cleaning a file: store on failure
  std::shared_ptr<Communicator> comm;
  MemoryKind where = MemoryKind::host;
  Tensor input, output, host;

  void fill_pattern(const Tensor& dst, std::int64_t count) {
    const Tensor h = host.view(0, {count});
    for (std::int64_t i = 0; i < count; ++i) store_host_value(h, i, check_input_value(ranks.rank, i));
    backend->copy(h, dst);
  }

  /// One all-reduce of `count` elements, waited for.
  void step(std::int64_t count, bool in_place) {
    const Tensor in = input.view(0, {count});
    const Tensor target = in_place ? in : output.view(0, {count});
    if (!in_place) {
      backend->copy(in, target);
      // The copy runs on the compute stream, the collective on the communication stream.
      const auto ready = backend->record_event(StreamKind::compute);
      backend->wait_event(StreamKind::communication, *ready);
    }
    comm->all_reduce(target, o.op)->wait();
  }

  double timed_us(std::int64_t count, bool in_place) {
    for (int i = 0; i < o.warmup; ++i) step(count, in_place);
    comm->barrier();
    const auto start = Clock::now();
    for (int i = 0; i < o.iters; ++i) step(count, in_place);
    const auto end = Clock::now();
    return std::chrono::duration<double, std::micro>(end - start).count() / std::max(1, o.iters);
  }

  std::int64_t wrong_elements(std::int64_t count, bool in_place) {
    std::int64_t wrong = 0;
    for (int c = 0; c < o.check; ++c) {
      fill_pattern(input.view(0, {count}), count);
      step(count, in_place);
      const Tensor result = (in_place ? input : output).view(0, {count});
      const Tensor h = host.view(0, {count});
      backend->copy(result, h);
      const double tol = check_tolerance(o.dtype);
      for (std::int64_t i = 0; i < count; ++i) {
        const double want = check_expected_value(o.op, ranks.world_size, i);
        const double got = load_host_value(h, i);
        if (!(std::fabs(got - want) <= tol * std::fabs(want))) ++wrong;
      }
    }
    return wrong;
  }

  /// Sums `values` over ranks (f32 through the communicator itself, in its memory kind).
  std::vector<double> sum_over_ranks(const std::vector<double>& values) {
    const auto n = static_cast<std::int64_t>(values.size());
    Tensor h = host_tensor({n}, DType::f32);
    for (std::int64_t i = 0; i < n; ++i) h.data_as<float>()[i] = static_cast<float>(values[i]);
    Tensor d = backend->allocate({n}, DType::f32, where);
    backend->copy(h, d);
    comm->all_reduce(d, ReduceOp::sum)->wait();
    backend->copy(d, h);
    std::vector<double> out(values.size());
    for (std::int64_t i = 0; i < n; ++i) out[i] = h.data_as<float>()[i];
    return out;
  }

  Half finish(std::int64_t bytes, double time_sum, double wrong_sum) const {
    Half h;
    h.time_us = time_sum / ranks.world_size;
    h.algbw = h.time_us > 0 ? static_cast<double>(bytes) / (h.time_us * 1e-6) / 1e9 : 0.0;
    const int n = ranks.world_size;
    h.busbw = h.algbw * (2.0 * (n - 1) / n);
    h.wrong = o.check > 0 ? static_cast<std::int64_t>(std::llround(wrong_sum)) : -1;
    return h;
  }

  Row run_size(std::int64_t size) {
    Row row;
    row.count = size / static_cast<std::int64_t>(dtype_size(o.dtype));
    row.bytes = row.count * static_cast<std::int64_t>(dtype_size(o.dtype));
    fill_pattern(input.view(0, {std::max<std::int64_t>(row.count, 1)}), std::max<std::int64_t>(row.count, 1));
    const double oop_time = timed_us(row.count, false);
    const double oop_wrong = o.check > 0 ? static_cast<double>(wrong_elements(row.count, false)) : 0.0;
    fill_pattern(input.view(0, {std::max<std::int64_t>(row.count, 1)}), std::max<std::int64_t>(row.count, 1));
    const double ip_time = timed_us(row.count, true);
    const double ip_wrong = o.check > 0 ? static_cast<double>(wrong_elements(row.count, true)) : 0.0;
    const auto sums = sum_over_ranks({oop_time, ip_time, oop_wrong, ip_wrong});
    row.out_of_place = finish(row.bytes, sums[0], sums[2]);
    row.in_place = finish(row.bytes, sums[1], sums[3]);
    return row;
  }
};

// ---- output -------------------------------------------------------------------------------

std::string time_text(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string half_text(const Half& h) {
  const std::string wrong = h.wrong < 0 ? std::string("N/A") : std::to_string(h.wrong);
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5}", time_text(h.time_us), h.algbw, h.busbw, wrong);
}

/// "pid|host|device index|device name" for one rank, shared through the store.
std::string rank_line_payload(const Backend& backend) {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const DeviceInfo dev = backend.device();
  return fmt::format("{}|{}|{}|{}|{}", ::getpid(), host, dev.index, backend.name(), dev.name);
}

/// -J FILE, created empty and exclusively before the run, as nccl-tests does: an existing FILE is
/// kept and FILE.0, FILE.1, ... are tried instead. Returns the path claimed.
std::string claim_json_file(const std::string& path) {
  std::string target = path;
  for (int n = 0;; ++n) {
    std::FILE* f = std::fopen(target.c_str(), "wx");
    if (f) {
      std::fclose(f);
      return target;
    }
    if (errno != EEXIST || n > 999) {
      throw IoError(fmt::format("-J/--output_file: cannot create {}: {}", target, std::strerror(errno)));
    }
    target = fmt::format("{}.{}", path, n);
  }
}

void write_json_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text << "\n";
  f.close();
  if (!f) throw IoError(fmt::format("-J/--output_file: cannot write {}", path));
}

std::vector<std::string> split(const std::string& s, char sep, std::size_t parts) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (out.size() + 1 < parts) {
    const std::size_t p = s.find(sep, start);
    if (p == std::string::npos) break;
    out.push_back(s.substr(start, p - start));
    start = p + 1;
  }
  out.push_back(s.substr(start));
  while (out.size() < parts) out.emplace_back();
  return out;
}

/// --nproc N: a private rendezvous directory and N supervised copies of this program.
int run_supervised(const std::vector<std::string>& args, const std::vector<fs::path>& plugin_dirs, int nproc) {
  if (nproc < 1) throw ConfigError(fmt::format("--nproc {} must be at least 1", nproc));
  std::string pattern = (fs::temp_directory_path() / "kiln-bench-comm-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) {
    throw IoError(fmt::format("cannot create a rendezvous directory {}: set TMPDIR to a writable directory", pattern));
  }
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{pattern};
  launch::SuperviseOptions so;
  so.program = fs::read_symlink("/proc/self/exe");
  so.args = {"bench-comm"};
  for (const auto& d : plugin_dirs) {
    so.args.push_back("--plugin-path");
    so.args.push_back(fs::absolute(d).string());
  }
  for (const auto& a : without_option(args, "nproc")) so.args.push_back(a);
  so.nproc = nproc;
  so.rendezvous = "file:" + pattern;
  const launch::SuperviseOutcome outcome = launch::supervise(so);
  if (outcome.exit_code != 0) std::cerr << "kiln: error: " << outcome.message << std::endl;
  return outcome.exit_code;
}

}  // namespace

std::int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  std::string s = text;
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b') && s.size() > 1 && !std::isdigit(static_cast<unsigned char>(s[s.size() - 2]))) {
    s.pop_back();
  }
  std::int64_t mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K': case 'k': mult = 1LL << 10; s.pop_back(); break;
      case 'M': case 'm': mult = 1LL << 20; s.pop_back(); break;
      case 'G': case 'g': mult = 1LL << 30; s.pop_back(); break;
      default: break;
    }
  }
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || v < 0) {
    throw ConfigError(fmt::format("{} '{}' is not a size: write bytes as a number with an optional K, M or G suffix "
                                  "(powers of 1024), e.g. 8, 64K, 32M",
                                  flag, text));
  }
  return static_cast<std::int64_t>(v) * mult;
}

int run_bench_comm_command(const std::vector<std::string>& args, const std::vector<fs::path>& plugin_dirs,
                           std::ostream& out) {
  BenchOptions o;
  std::string minb = "32M", maxb = "32M", stepb = "1M", dtype = "float", op = "sum";
  std::vector<std::string> extra_paths;
  int rank = -1, world = -1, nproc = 0, ngpus = 1;
  double timeout_s = 300, warn_after_s = 60;
  po::options_description opts("kiln bench-comm options (nccl-tests flags, plus plugin choice)");
  opts.add_options()
      ("help,h", "show this help")
      ("comm", po::value(&o.comm)->required(), "communicator plugin to measure (gloo, nccl-ring, nccl-tree, local)")
      ("backend", po::value(&o.backend), "compute backend plugin whose memory is reduced (default cpu)")
      ("set", po::value(&o.sets)->composing(), "plugin parameter: --set comm.algorithm=ring_chunked (repeatable)")
      ("minbytes,b", po::value(&minb), "smallest size in bytes, K/M/G suffixes (default 32M)")
      ("maxbytes,e", po::value(&maxb), "largest size in bytes (default 32M)")
      ("stepfactor,f", po::value(&o.step_factor), "multiply the size by this factor between rows")
      ("stepbytes,i", po::value(&stepb), "add this many bytes between rows when -f is not given (default 1M)")
      ("iters,n", po::value(&o.iters), "timed iterations per size (default 20)")
      ("warmup_iters,w", po::value(&o.warmup), "warm-up iterations per size (default 5)")
      ("check,c", po::value(&o.check), "check iterations per size; 0 disables #wrong (default 1)")
      ("datatype,d", po::value(&dtype), "float, half, bfloat16 or double (default float)")
      ("op,o", po::value(&op), "sum, avg, max or min (default sum)")
      ("ngpus,g", po::value(&ngpus), "GPUs per process; only 1 (each rank drives one device)")
      ("json", po::bool_switch(&o.json), "print nccl-tests' JSON report instead of the table")
      ("output_file,J", po::value(&o.json_file), "also write nccl-tests' JSON report to this file")
      ("nproc", po::value(&nproc), "start N local ranks and supervise them (like torchrun --nproc-per-node)")
      ("rank", po::value(&rank), "this process's rank (with --world-size; overrides launcher variables)")
      ("world-size", po::value(&world), "number of ranks (with --rank)")
      ("timeout", po::value(&timeout_s), "seconds a rendezvous or collective may take before failing (default 300)")
      ("warn-after", po::value(&warn_after_s),
       "at the rendezvous, say every this many seconds which ranks are still awaited; 0 = never (default 60)")
      ("plugin-path", po::value(&extra_paths)->composing(), "extra plugin directory, searched first (repeatable)");
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln bench-comm --comm NAME [--backend NAME] [-b 8 -e 64M -f 2] [-n 20 -w 5 -c 1]\n"
           "                       [-d float|half|bfloat16|double] [-o sum|avg|max|min] [-g 1] [--json] [-J FILE]\n"
           "                       [--nproc N]\n\n"
        << opts << "\n";
    return 0;
  }
  po::notify(vm);

  if (ngpus != 1) {
    throw ConfigError(fmt::format("-g/--ngpus {}: Kiln drives one device per rank, so only -g 1 is valid; start more "
                                  "ranks instead (--nproc N, torchrun or mpirun)",
                                  ngpus));
  }
  const std::string start_time = bench_json_now();

  std::vector<fs::path> dirs = plugin_dirs;
  for (const auto& p : extra_paths) dirs.emplace_back(p);
  if (nproc > 0) return run_supervised(args, plugin_dirs, nproc);

  o.min_bytes = parse_byte_size(minb, "-b/--minbytes");
  o.max_bytes = parse_byte_size(maxb, "-e/--maxbytes");
  o.step_bytes = parse_byte_size(stepb, "-i/--stepbytes");
  o.dtype = parse_dtype(dtype, o.dtype_label);
  o.op = parse_op(op);
  if (o.max_bytes < o.min_bytes) {
    throw ConfigError(fmt::format("-e/--maxbytes {} is below -b/--minbytes {}", o.max_bytes, o.min_bytes));
  }
  if (vm.count("stepfactor") && o.step_factor < 2) {
    throw ConfigError(fmt::format("-f/--stepfactor {} must be at least 2", o.step_factor));
  }
  if (!vm.count("stepfactor") && o.step_bytes < 1 && o.max_bytes > o.min_bytes) {
    throw ConfigError("-i/--stepbytes must be at least 1 when -b and -e differ");
  }
  if (o.iters < 1) throw ConfigError(fmt::format("-n/--iters {} must be at least 1", o.iters));
  if (o.warmup < 0) throw ConfigError(fmt::format("-w/--warmup_iters {} must be >= 0", o.warmup));
  if (o.check < 0) throw ConfigError(fmt::format("-c/--check {} must be >= 0", o.check));
  if (!(timeout_s > 0)) throw ConfigError(fmt::format("--timeout {} must be > 0 seconds", timeout_s));
  o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  if (!(warn_after_s >= 0)) throw ConfigError(fmt::format("--warn-after {} must be >= 0 seconds", warn_after_s));
  o.warn_after = std::chrono::milliseconds(static_cast<std::int64_t>(warn_after_s * 1000));

  Bench b;
  b.o = o;
  launch::ExplicitRanks explicit_ranks;
  if (vm.count("rank")) explicit_ranks.rank = rank;
  if (vm.count("world-size")) explicit_ranks.world_size = world;
  b.ranks = launch::resolve_ranks(explicit_ranks);
  log::configure(b.ranks);

  // The plugins' tables go through the same validation as a training config, so --set
  // comm.algorithm=... is checked against the plugin's schema with the usual messages.
  const std::string toml = fmt::format("[backend]\ntype = \"{}\"\n[comm]\ntype = \"{}\"\n", o.backend, o.comm);
  config::Config cfg = config::Config::parse(toml, "bench-comm", o.sets);
  plugin::Registry registry(plugin::default_search_path(dirs));
  registry.index();  // loads only the plugins this run names (registry.hpp)
  const auto& backend_info = registry.require(KILN_KIND_BACKEND, cfg.plugin_type("backend"), "backend (--backend)");
  const ParamMap backend_params = cfg.validate("backend", backend_info.params);
  const auto& comm_info = registry.require(KILN_KIND_COMMUNICATOR, cfg.plugin_type("comm"), "comm (--comm)");
  const ParamMap comm_params = cfg.validate("comm", comm_info.params);
  cfg.check_all_consumed();

  PluginArgs backend_args{&backend_params, b.ranks, {}};
  PluginArgs comm_args{&comm_params, b.ranks, {}};
  b.backend = registry.create_backend(backend_info, backend_args);
  b.comm = registry.create_communicator(comm_info, comm_args);

  std::string rendezvous = "memory";
  if (b.ranks.world_size > 1) {
    const auto env = launch::process_env()("KILN_RENDEZVOUS");
    if (env && !env->empty()) {
      rendezvous = *env;
    } else if (auto implied = dist::launcher_rendezvous(b.ranks)) {
      rendezvous = implied->spec;  // torchrun's MASTER_ADDR/PORT, or mpi under Open MPI
    } else {
      throw ConfigError(fmt::format(
          "rank {} of {} (from {}) needs a rendezvous: export KILN_RENDEZVOUS=tcp://<rank 0's host>:<port> or "
          "file:<dir> with a directory every rank can see, or let `kiln bench-comm --nproc {}` start the ranks",
          b.ranks.rank, b.ranks.world_size, b.ranks.source, b.ranks.world_size));
    }
  }
  const dist::WaitReport report{o.warn_after, [](const std::string& text) { log::get("dist")->warn("{}", text); },
                                "--timeout"};
  b.store = dist::make_store(rendezvous, b.ranks, o.timeout, report);
  b.meeting = std::make_unique<dist::WaitReportingStore>(*b.store, report, b.ranks.rank);
  b.start_store = std::make_unique<dist::CleanOnFailureStore>(*b.meeting, *b.store, b.ranks.rank == 0);
  const std::string line_key = fmt::format("kiln/bench-comm/rank{}", b.ranks.rank);
  dist::refuse_earlier_keys(*b.store, line_key, b.ranks, dist::describe_store(*b.store));
  CommContext ctx;
  ctx.ranks = b.ranks;
  ctx.store = b.start_store.get();
  ctx.backend = b.backend.get();
  ctx.timeout = o.timeout;
  b.comm->connect(ctx);

  b.where = b.backend->device().memory;
  if (!b.comm->accepts(b.where)) {
    if (b.comm->accepts(MemoryKind::host)) {
      b.where = MemoryKind::host;
    } else {
      throw ConfigError(fmt::format("communicator '{}' accepts neither the memory of backend '{}' nor host memory; "
                                    "pick a matching pair (nccl-* with backend cuda, gloo with cpu)",
                                    o.comm, o.backend));
    }
  }
  const std::int64_t max_count = std::max<std::int64_t>(1, o.max_bytes / static_cast<std::int64_t>(dtype_size(o.dtype)));
  b.input = b.backend->allocate({max_count}, o.dtype, b.where);
  b.output = b.backend->allocate({max_count}, o.dtype, b.where);
  b.host = host_tensor({max_count}, o.dtype);

  // Who is where: every rank publishes one line; rank 0 prints them in rank order.
  const std::string payload = rank_line_payload(*b.backend);
  b.start_store->set(line_key, std::vector<std::uint8_t>(payload.begin(), payload.end()));
  std::vector<std::string> rank_lines;
  std::vector<BenchJsonDevice> devices;
  if (b.ranks.rank == 0) {
    for (int r = 0; r < b.ranks.world_size; ++r) {
      const auto v = b.start_store->get(fmt::format("kiln/bench-comm/rank{}", r), o.timeout);
      const auto f = split(std::string(v.begin(), v.end()), '|', 5);
      rank_lines.push_back(fmt::format("#  Rank {:2} Group  0 Pid {:>6} on {:>10} device {:>2} [{}] {}", r, f[0], f[1],
                                       f[2], f[3], f[4]));
      BenchJsonDevice d;
      d.rank = r;
      d.pid = std::atoi(f[0].c_str());
      d.hostname = f[1];
      d.device = std::atoi(f[2].c_str());
      d.device_hex = f[3];
      d.device_info = f[4];
      devices.push_back(d);
    }
  }

  const std::string describe = b.comm->describe();
  std::string json_path;
  if (b.ranks.rank == 0 && !o.json_file.empty()) json_path = claim_json_file(o.json_file);
  if (b.ranks.rank == 0 && !o.json) {
    if (!json_path.empty()) out << "# Writing JSON output to " << json_path << "\n";
    const std::string step = vm.count("stepfactor") ? fmt::format("{}(factor)", o.step_factor)
                                                    : fmt::format("{}(bytes)", o.step_bytes);
    out << fmt::format("# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg iters: 1 "
                       "validation: {} graph: 0\n",
                       o.min_bytes, o.max_bytes, step, o.warmup, o.iters, o.check > 0 ? 1 : 0);
    out << fmt::format("# kiln bench-comm: all_reduce, comm {} ({}), backend {}, {} rank(s) (ranks from {})\n", o.comm,
                       describe, o.backend, b.ranks.world_size, b.ranks.source);
    out << "# out-of-place = copy input to output, then in-place all_reduce of output (its time includes the copy);\n"
           "# every collective is waited for before the next (blocking); times are averaged over ranks\n";
    out << "#\n# Using devices\n";
    for (const auto& l : rank_lines) out << l << "\n";
    out << "#\n";
    out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n",
                       "", "", "", "", "");
    out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}\n",
                       "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                       "busbw", "#wrong");
    out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}\n",
                       "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    out.flush();
  }

  std::vector<Row> rows;
  double bw_sum = 0;
  std::int64_t wrong_total = 0;
  for (const std::int64_t size : sizes_of(o)) {
    const Row row = b.run_size(size);
    rows.push_back(row);
    bw_sum += row.out_of_place.busbw + row.in_place.busbw;
    wrong_total += std::max<std::int64_t>(0, row.out_of_place.wrong) + std::max<std::int64_t>(0, row.in_place.wrong);
    if (b.ranks.rank == 0 && !o.json) {
      out << fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}", row.bytes, row.count, o.dtype_label, dist::reduce_op_name(o.op), -1)
          << half_text(row.out_of_place) << half_text(row.in_place) << "\n";
      out.flush();
    }
  }
  const double avg_bw = rows.empty() ? 0.0 : bw_sum / static_cast<double>(2 * rows.size());
  b.comm->barrier();
  // Every rank is past the store: a `file:` directory is emptied for the next run (stores.hpp).
  b.start_store->dismiss();
  if (b.ranks.rank == 0) dist::forget_rendezvous_keys(*b.store);

  if (b.ranks.rank == 0) {
    if (o.json || !o.json_file.empty()) {
      BenchJsonReport r;
      r.start_time = start_time;
      r.args = {"kiln", "bench-comm"};
      r.args.insert(r.args.end(), args.begin(), args.end());
      r.env = bench_json_env(environ);
      r.min_bytes = o.min_bytes;
      r.max_bytes = o.max_bytes;
      r.step_factor = vm.count("stepfactor") ? o.step_factor : 0;
      r.step_bytes = o.step_bytes;
      r.warmup_iters = o.warmup;
      r.iters = o.iters;
      r.check = o.check;
      r.devices = devices;
      r.type = o.dtype_label;
      r.redop = dist::reduce_op_name(o.op);
      for (const Row& row : rows) {
        const auto half = [](const Half& h) { return BenchJsonHalf{h.time_us, h.algbw, h.busbw, h.wrong}; };
        r.results.push_back({row.bytes, row.count, half(row.out_of_place), half(row.in_place)});
      }
      r.wrong_total = wrong_total;
      r.avg_bus_bw = avg_bw;
      r.comm = o.comm;
      r.comm_describe = describe;
      r.backend = o.backend;
      r.ranks_from = b.ranks.source;
      r.world_size = b.ranks.world_size;
      r.end_time = bench_json_now();
      const std::string text = bench_json_text(r);
      if (o.json) out << text << "\n";
      if (!json_path.empty()) write_json_file(json_path, text);
    }
    if (!o.json) {
      out << fmt::format("# Out of bounds values : {} {}\n", wrong_total, wrong_total ? "FAILED" : "OK");
      out << fmt::format("# Avg bus bandwidth    : {:g}\n", avg_bw);
      out << "#\n";
    }
    out.flush();
  }
  return wrong_total > 0 ? 1 : 0;
}

}  // namespace kiln::cli
