// Message building for DnnCheck (dnn_check.hpp) beyond the SDK's shared checks.
// Library failures go through cuda_check.hpp's helpers so every cuDNN/cuBLAS/CUDA error reads
// the same way across the plugin ("<what>: cuDNN <name>: <message>").
#include "dnn/dnn_check.hpp"

#include <fmt/format.h>

#include "cuda_check.hpp"
#include "kiln/errors.hpp"

namespace kiln::cuda {

std::string_view layout_word(Layout layout) noexcept {
  switch (layout) {
    case Layout::row_major: return "nchw";
    case Layout::nhwc: return "nhwc";
    case Layout::opaque: return "opaque";
  }
  return "?";
}

void DnnCheck::fail_library(const std::string& what) const {
  throw BackendError(fmt::format("cuda backend, {}: {}", op_name(op()), what));
}

void DnnCheck::cudnn_failed(cudnnStatus_t s, const std::string& what) const {
  check_cudnn(s, fmt::format("cuda backend, {}: {}", op_name(op()), what));
}

void DnnCheck::cublas_failed(cublasStatus_t s, const std::string& what) const {
  check_cublas(s, fmt::format("cuda backend, {}: {}", op_name(op()), what));
}

}  // namespace kiln::cuda
