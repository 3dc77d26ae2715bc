// CudaEvent (cuda_event.hpp).
#include "device/cuda_event.hpp"

#include "cuda_check.hpp"
#include "device/device_select.hpp"

namespace kiln::cuda {

CudaEvent::CudaEvent(cudaStream_t stream, int device) : device_(device) {
  check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "record_event: cudaEventCreateWithFlags");
  const cudaError_t e = cudaEventRecord(event_, stream);
  if (e != cudaSuccess) {
    cudaEventDestroy(event_);
    check_cuda(e, "record_event: cudaEventRecord");
  }
}

CudaEvent::~CudaEvent() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != device_) cudaSetDevice(device_);
  cudaEventDestroy(event_);
}

void CudaEvent::synchronize() {
  make_current(device_);
  check_cuda(cudaEventSynchronize(event_), "Event::synchronize: cudaEventSynchronize");
}

}  // namespace kiln::cuda
