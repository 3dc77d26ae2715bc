// A stand-in for libnvidia-ml.so.1 with the six entry points NvmlSampler resolves, so the
// dlopen/dlsym path and the counter values are tested without a driver. One device, bus id
// 0000:19:00.0, 42 % busy, 1 GiB of 80 GiB used.
#include <cstring>

namespace {
int device_token = 0;
}

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() { return 0; }
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) const char* nvmlErrorString(int r) {
  return r == 6 ? "Not Found" : "Unknown Error";
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* id, void** device) {
  if (std::strcmp(id, "0000:19:00.0") != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *device = &device_token;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* device, unsigned int* rates) {
  if (device != &device_token) return 2;
  rates[0] = 42;  // gpu
  rates[1] = 17;  // memory
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, unsigned long long* memory) {
  if (device != &device_token) return 2;
  memory[0] = 80ull << 30;  // total
  memory[1] = 79ull << 30;  // free
  memory[2] = 1ull << 30;   // used
  return 0;
}
}
