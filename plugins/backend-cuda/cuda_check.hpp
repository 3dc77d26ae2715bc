// Checked calls into CUDA, cuDNN and cuBLAS: every status that is not success becomes a
// kiln::BackendError naming the op, what was called (with shapes where the caller gives them) and
// the library's own message; cudaErrorMemoryAllocation becomes the out-of-memory message (asked,
// free, hint to lower the per-rank batch). Use after every launch: check_last_launch("relu").
#pragma once

#include <cstddef>
#include <string_view>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace kiln::cuda {

/// Throws BackendError("<what>: <cudaGetErrorName>: <cudaGetErrorString>") unless e == cudaSuccess.
void check_cuda(cudaError_t e, std::string_view what);
/// Throws BackendError("<what>: cuDNN <name>: <cudnnGetErrorString> <last error message>").
void check_cudnn(cudnnStatus_t s, std::string_view what);
/// Throws BackendError("<what>: cuBLAS <name>: <cublasGetStatusString>").
void check_cublas(cublasStatus_t s, std::string_view what);
/// cudaGetLastError() after a kernel launch, checked as above.
void check_last_launch(std::string_view what);
/// Throws the out-of-memory BackendError: "<what>: out of GPU memory asking for N MiB on device D
/// (F MiB free of T MiB); use a smaller per-rank batch ...".
[[noreturn]] void throw_out_of_memory(std::string_view what, std::size_t bytes, int device);

}  // namespace kiln::cuda
