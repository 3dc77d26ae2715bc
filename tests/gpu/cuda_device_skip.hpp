// The one way a gpu-labelled test reports "skipped" without a device: it prints why and exits
// 77, which CTest turns into Skipped (SKIP_RETURN_CODE 77), never Passed. Header-only: each gpu
// test binary already links the CUDA runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>

namespace kiln::test {

/// 0 when a CUDA device is usable; otherwise prints "SKIPPED: no CUDA device (...); <what> needs
/// one" and returns 77 for main() to return.
inline int skip_without_cuda_device(const char* what) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) return 0;
  std::printf("SKIPPED: no CUDA device (%s); %s needs one\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices",
              what);
  return 77;
}

}  // namespace kiln::test
