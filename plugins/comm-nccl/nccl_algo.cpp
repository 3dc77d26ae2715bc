// NCCL_ALGO values and device checks (see nccl_algo.hpp).
#include "nccl_algo.hpp"

#include <fmt/format.h>

namespace kiln::nccl {

std::optional<std::string> algo_env_value(Algo algo, int nccl_version) {
  if (nccl_version >= kPerFunctionAlgoVersion) {
    return std::string(algo == Algo::ring ? "allreduce:ring" : "allreduce:tree");
  }
  if (algo == Algo::ring) return std::string("Ring");
  return std::nullopt;
}

const char* algo_display_name(Algo algo) noexcept { return algo == Algo::ring ? "Ring" : "Tree"; }
const char* algo_plugin_name(Algo algo) noexcept { return algo == Algo::ring ? "nccl-ring" : "nccl-tree"; }

std::string nccl_version_text(int v) {
  // NCCL >= 2.9 encodes X*10000 + Y*100 + Z.
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

std::optional<std::string> device_problem(int backend_device, int visible_devices) {
  if (backend_device >= 0 && backend_device < visible_devices) return std::nullopt;
  return fmt::format("the backend computes on CUDA device {}, but this process sees {} device(s)", backend_device,
                     visible_devices);
}

}  // namespace kiln::nccl
