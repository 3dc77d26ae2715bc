// Checked CUDA / cuDNN / cuBLAS calls (declarations and message formats in cuda_check.hpp).
// Every message starts with what the caller was doing; library names and strings come from the
// libraries themselves (they work without a GPU, so CI tests the mapping).
#include "cuda_check.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "memory/oom_message.hpp"

namespace kiln::cuda {

void check_cuda(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return;
  if (e == cudaErrorMemoryAllocation) {
    // The failed request's size is unknown here (a library allocated for itself); still say how
    // much is free and what to do.
    cudaGetLastError();  // clear the sticky-free error so the queries below work
    int device = 0;
    cudaGetDevice(&device);
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    constexpr double kMiB = 1024.0 * 1024.0;
    throw BackendError(fmt::format(
        "{}: {}: {} ({:.1f} MiB free of {:.1f} MiB on device {}); use a smaller per-rank batch "
        "(data.batch_size) or a lower precision",
        what, cudaGetErrorName(e), cudaGetErrorString(e), static_cast<double>(free_bytes) / kMiB,
        static_cast<double>(total_bytes) / kMiB, device));
  }
  throw BackendError(fmt::format("{}: {}: {}", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}

void check_cudnn(cudnnStatus_t s, std::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  // cudnnGetErrorString gives the status name; the detail is in cuDNN's last error message
  // (per thread, cleared by reading it).
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  throw BackendError(fmt::format("{}: cuDNN {} (status {}): {}", what, cudnnGetErrorString(s),
                                 static_cast<int>(s), detail[0] != '\0' ? detail : "no further detail from cuDNN"));
}

void check_cublas(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw BackendError(fmt::format("{}: cuBLAS {}: {}", what, cublasGetStatusName(s), cublasGetStatusString(s)));
}

void check_last_launch(std::string_view what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) check_cuda(e, fmt::format("{} (kernel launch)", what));
}

void throw_out_of_memory(std::string_view what, std::size_t bytes, int device) {
  cudaGetLastError();  // a failed cudaMalloc leaves its error behind; do not report it twice
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  throw BackendError(format_out_of_memory(what, bytes, device, free_bytes, total_bytes));
}

}  // namespace kiln::cuda
