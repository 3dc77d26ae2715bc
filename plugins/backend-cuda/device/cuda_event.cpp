// CudaEvent (cuda_event.hpp).
#include "device/cuda_event.hpp"

#include "cuda_check.hpp"

namespace kiln::cuda {

CudaEvent::CudaEvent(cudaStream_t stream) {
  check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "record_event: cudaEventCreateWithFlags");
  const cudaError_t e = cudaEventRecord(event_, stream);
  if (e != cudaSuccess) {
    cudaEventDestroy(event_);
    check_cuda(e, "record_event: cudaEventRecord");
  }
}

CudaEvent::~CudaEvent() { cudaEventDestroy(event_); }

void CudaEvent::synchronize() { check_cuda(cudaEventSynchronize(event_), "Event::synchronize: cudaEventSynchronize"); }

}  // namespace kiln::cuda
