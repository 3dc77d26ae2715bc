// NvmlSampler: GPU utilisation and memory through NVML, loaded with dlopen at run time so the
// plugin never links against the driver's libnvidia-ml (absent on build machines and in some
// containers). Without the library, or if NVML fails to initialise or to find the device, the
// sampler logs one info line and reports nothing; it never throws after construction.
// Samples are taken lazily when read, at most every 0.5 s (the trainer reads between steps).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace kiln::cuda {

class NvmlSampler {
 public:
  /// `pci_bus_id` names the device ("0000:19:00.0", from cudaDeviceGetPCIBusId): NVML numbers
  /// devices differently from CUDA under CUDA_VISIBLE_DEVICES, the bus id is the same in both.
  /// `library` is the file to dlopen (tests pass a missing name).
  explicit NvmlSampler(std::string pci_bus_id, const char* library = "libnvidia-ml.so.1");
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  /// Whether NVML was loaded and the device found.
  bool available() const noexcept { return device_ != nullptr; }
  /// Why it is not available ("" when it is).
  const std::string& unavailable_reason() const noexcept { return reason_; }
  /// {"utilisation_pct", "memory_used_mib", "memory_total_mib"} from the latest sample; {} when
  /// NVML is unavailable. Thread-safe.
  std::map<std::string, double> sample();

 private:
  struct Api;  // the NVML entry points, resolved with dlsym
  bool load(const char* library);

  std::string pci_bus_id_;
  void* library_ = nullptr;
  Api* api_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  bool initialised_ = false;
  std::string reason_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_{};
  std::map<std::string, double> latest_;
};

}  // namespace kiln::cuda
