// Device choice from the local rank and the banner description (device_select.hpp).
#include "device/device_select.hpp"

#include <cstdlib>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include "cuda_check.hpp"
#include "kiln/errors.hpp"

namespace kiln::cuda {
namespace {

/// "13.0" from CUDA's 1000 * major + 10 * minor encoding.
std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

/// "9.19.0" from cuDNN 9's 10000 * major + 100 * minor + patch encoding.
std::string cudnn_version_string(std::size_t v) {
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

}  // namespace

int choose_device(int requested, int local_rank) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw BackendError(fmt::format(
        "backend 'cuda': no usable CUDA device (cudaGetDeviceCount: {}); run on a machine with an "
        "NVIDIA GPU or use backend.type = \"cpu\"",
        e != cudaSuccess ? cudaGetErrorString(e) : "no devices are visible"));
  }
  const int device = requested >= 0 ? requested : local_rank;
  if (device < 0 || device >= count) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    const std::string who = requested >= 0 ? fmt::format("backend.device = {} asks for", requested)
                                           : fmt::format("local rank {} needs", local_rank);
    throw BackendError(fmt::format(
        "backend 'cuda': {} CUDA device {}, but this node has {} visible device(s) "
        "(CUDA_VISIBLE_DEVICES={}); start at most {} process(es) per node or set backend.device",
        who, device, count, visible ? visible : "unset", count));
  }
  check_cuda(cudaSetDevice(device), fmt::format("backend 'cuda': cudaSetDevice({})", device));
  return device;
}

void make_current(int device) {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device) {
    check_cuda(cudaSetDevice(device), fmt::format("backend 'cuda': cudaSetDevice({}) on a new thread", device));
  }
}

std::string pci_bus_id(int device) {
  char id[32] = {0};
  check_cuda(cudaDeviceGetPCIBusId(id, sizeof(id), device), fmt::format("cudaDeviceGetPCIBusId({})", device));
  return id;
}

DeviceInfo describe_device(int device) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), fmt::format("cudaGetDeviceProperties({})", device));
  int driver = 0;
  int runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int cublas_major = 0;
  int cublas_minor = 0;
  int cublas_patch = 0;
  cublasGetProperty(MAJOR_VERSION, &cublas_major);
  cublasGetProperty(MINOR_VERSION, &cublas_minor);
  cublasGetProperty(PATCH_LEVEL, &cublas_patch);

  DeviceInfo info;
  info.name = prop.name;
  info.memory = MemoryKind::device;
  info.index = device;
  info.total_memory = static_cast<std::int64_t>(prop.totalGlobalMem);
  info.threads = 1;  // one host thread issues the work
  info.detail = fmt::format(
      "compute capability {}.{}, {} SMs, PCI {}, driver {}, runtime {}, cuDNN {}, cuBLAS {}.{}.{}",
      prop.major, prop.minor, prop.multiProcessorCount, pci_bus_id(device), cuda_version_string(driver),
      cuda_version_string(runtime), cudnn_version_string(cudnnGetVersion()), cublas_major, cublas_minor,
      cublas_patch);
  return info;
}

}  // namespace kiln::cuda
