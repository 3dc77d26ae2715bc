// Message building for DnnCheck (dnn_check.hpp): out of line so the inline checks stay small.
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

void DnnCheck::fail(const std::string& what) const {
  throw BackendError(fmt::format("cuda backend, {}: {}; fix the arguments the calling layer passes",
                                 op_name(op_), what));
}

void DnnCheck::fail_library(const std::string& what) const {
  throw BackendError(fmt::format("cuda backend, {}: {}", op_name(op_), what));
}

void DnnCheck::fail_unusable(std::string_view name, const Tensor& t, LayoutRule rule) const {
  if (!t.defined()) fail(fmt::format("{} is undefined but is required", name));
  if (t.memory() != MemoryKind::device) {
    fail(fmt::format("{} {} is in host memory; cuda ops read device tensors (Backend::allocate "
                     "with MemoryKind::device, or to_device())",
                     name, t.describe()));
  }
  fail(fmt::format("{} {} has layout {}, but the cuda backend takes {} here", name, t.describe(),
                   layout_word(t.layout()),
                   rule == LayoutRule::image ? "row_major (nchw) or nhwc" : "row_major only"));
}

void DnnCheck::fail_dtype(std::string_view name, const Tensor& t, DType want) const {
  fail(fmt::format("{} is {} but must be {}", name, t.describe(), dtype_name(want)));
}

void DnnCheck::fail_float_dtype(std::string_view name, const Tensor& t) const {
  fail(fmt::format("{} is {} but must be f32, bf16 or f16", name, t.describe()));
}

void DnnCheck::fail_shape(std::string_view name, const Tensor& t, const Shape& want) const {
  fail(fmt::format("{} is {} but must have shape {}", name, t.describe(), shape_string(want)));
}

void DnnCheck::fail_rank(std::string_view name, const Tensor& t, int want) const {
  fail(fmt::format("{} is {} but must be {}-D", name, t.describe(), want));
}

void DnnCheck::cudnn_failed(cudnnStatus_t s, const std::string& what) const {
  check_cudnn(s, fmt::format("cuda backend, {}: {}", op_name(op_), what));
}

void DnnCheck::cublas_failed(cublasStatus_t s, const std::string& what) const {
  check_cublas(s, fmt::format("cuda backend, {}: {}", op_name(op_), what));
}

}  // namespace kiln::cuda
