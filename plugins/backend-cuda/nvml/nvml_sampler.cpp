// NvmlSampler: dlopen/dlsym of the five NVML calls it needs, with the NVML types declared here
// (stable ABI since NVML 2.x; nvml.h is not installed with the toolkit here).
#include "nvml/nvml_sampler.hpp"

#include <dlfcn.h>

#include <utility>

#include "kiln/sdk/log.hpp"

namespace kiln::cuda {
namespace {

using NvmlReturn = int;  // nvmlReturn_t: 0 = NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu;     // % of the sample period a kernel ran
  unsigned int memory;  // % of the sample period device memory was read or written
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr std::chrono::milliseconds kMinInterval{500};
constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

struct NvmlSampler::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization_rates)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
};

NvmlSampler::NvmlSampler(std::string pci_bus_id, const char* library) : pci_bus_id_(std::move(pci_bus_id)) {
  if (!load(library)) {
    log::get("cuda")->info("NVML not used ({}); device_* counters are not recorded", reason_);
  }
}

NvmlSampler::~NvmlSampler() {
  if (initialised_) api_->shutdown();
  delete api_;
  // The library stays loaded: NVML may keep threads, and unloading buys nothing at exit.
}

bool NvmlSampler::load(const char* library) {
  library_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    const char* err = dlerror();
    reason_ = std::string("dlopen ") + library + " failed: " + (err ? err : "unknown error");
    return false;
  }
  api_ = new Api;
  auto resolve = [this](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library_, symbol));
    if (fn == nullptr && reason_.empty()) reason_ = std::string("symbol ") + symbol + " missing from NVML";
  };
  resolve(api_->init, "nvmlInit_v2");
  resolve(api_->shutdown, "nvmlShutdown");
  resolve(api_->error_string, "nvmlErrorString");
  resolve(api_->handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  resolve(api_->utilization_rates, "nvmlDeviceGetUtilizationRates");
  resolve(api_->memory_info, "nvmlDeviceGetMemoryInfo");
  if (!reason_.empty()) return false;
  if (const NvmlReturn r = api_->init(); r != 0) {
    reason_ = std::string("nvmlInit_v2: ") + api_->error_string(r);
    return false;
  }
  initialised_ = true;
  NvmlDevice device = nullptr;
  if (const NvmlReturn r = api_->handle_by_pci_bus_id(pci_bus_id_.c_str(), &device); r != 0) {
    reason_ = "nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id_ + "): " + api_->error_string(r);
    return false;
  }
  device_ = device;
  return true;
}

std::map<std::string, double> NvmlSampler::sample() {
  if (device_ == nullptr) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (!latest_.empty() && now - last_ < kMinInterval) return latest_;
  last_ = now;
  NvmlUtilization util{};
  if (api_->utilization_rates(device_, &util) == 0) latest_["utilisation_pct"] = util.gpu;
  NvmlMemory memory{};
  if (api_->memory_info(device_, &memory) == 0) {
    latest_["memory_used_mib"] = static_cast<double>(memory.used) / kMiB;
    latest_["memory_total_mib"] = static_cast<double>(memory.total) / kMiB;
  }
  return latest_;
}

}  // namespace kiln::cuda
