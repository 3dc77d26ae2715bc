// CudaEvent: the cuda backend's kiln::Event, recorded on one of its streams. Timing is disabled
// (cudaEventDisableTiming): these events only order streams, and timing-free events are the
// cheap kind to record and wait for. The DataLoader's worker threads wait for (and may destroy)
// upload events; a thread that never chose a device would otherwise create a context on device 0,
// so synchronize() and the destructor make the event's device current first.
#pragma once

#include <cuda_runtime_api.h>

#include "kiln/backend.hpp"

namespace kiln::cuda {

class CudaEvent final : public Event {
 public:
  /// Creates the event and records it after the work enqueued so far on `stream` of `device`.
  CudaEvent(cudaStream_t stream, int device);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void synchronize() override;
  cudaEvent_t native() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = 0;
};

}  // namespace kiln::cuda
