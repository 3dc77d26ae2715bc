// Host CPU description for DeviceInfo (cpu_info.hpp).
// /proc/cpuinfo may be missing (containers, non-Linux); then the name is just "CPU" — the
// banner is informative, never a reason to fail a run.
#include "cpu_info.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/onednn_compat.hpp"

namespace kiln::cpu {
namespace {

struct CpuInfoText {
  std::string model = "CPU";
  bool avx512_bf16 = false;
};

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

CpuInfoText read_proc_cpuinfo() {
  CpuInfoText info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool have_model = false, have_flags = false;
  while (std::getline(in, line) && !(have_model && have_flags)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    if (key == "model name" && !have_model) {
      const std::string value = trim(line.substr(colon + 1));
      if (!value.empty()) info.model = value;
      have_model = true;
    } else if (key == "flags" && !have_flags) {
      std::istringstream flags(line.substr(colon + 1));
      std::string flag;
      while (flags >> flag) info.avx512_bf16 |= flag == "avx512_bf16";
      have_flags = true;
    }
  }
  return info;
}

}  // namespace

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

DeviceInfo describe_host_cpu(int threads) {
  const CpuInfoText text = read_proc_cpuinfo();
  DeviceInfo info;
  info.name = text.avx512_bf16 ? text.model + " (avx512_bf16)" : text.model;
  info.memory = MemoryKind::host;
  info.index = 0;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  info.total_memory = pages > 0 && page_size > 0 ? std::int64_t{pages} * page_size : 0;
  info.threads = threads;
  const dnnl_version_t* v = dnnl::version();
  info.detail = fmt::format("oneDNN {}.{}.{}, ISA {}, {} OpenMP threads", v->major, v->minor,
                            v->patch, isa_name(dnnl::get_effective_cpu_isa()), threads);
  return info;
}

namespace {

/// Whether oneDNN plans a forward convolution of `type` by `algorithm`: batch n, c -> c channels,
/// side x side, an r x r kernel with "same" padding. Planning only: no primitive is built.
bool onednn_plans_convolution(const dnnl::engine& engine, dnnl::algorithm algorithm, dnnl::memory::data_type type,
                              dnnl::memory::dim n, dnnl::memory::dim c, dnnl::memory::dim side, dnnl::memory::dim r) {
  const auto act = dnnl::memory::desc({n, c, side, side}, type, dnnl::memory::format_tag::any);
  const auto wei = dnnl::memory::desc({c, c, r, r}, type, dnnl::memory::format_tag::any);
  try {
    onednn::convolution_forward(engine, dnnl::prop_kind::forward_training, algorithm, act, wei, act, {1, 1}, {0, 0},
                                {r / 2, r / 2}, {r / 2, r / 2});
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

bool onednn_has_bf16(const dnnl::engine& engine) {
  return onednn_plans_convolution(engine, dnnl::algorithm::convolution_direct, dnnl::memory::data_type::bf16, 1, 16,
                                  4, 1);
}

bool onednn_has_f32_winograd(const dnnl::engine& engine) {
  return onednn_plans_convolution(engine, dnnl::algorithm::convolution_winograd, dnnl::memory::data_type::f32, 8, 64,
                                  56, 3);
}

}  // namespace kiln::cpu
