// cuDNN descriptor wrappers (cudnn_desc.hpp). Creation failures are checked (they only fail
// when cuDNN itself cannot allocate); destruction is noexcept and ignores the status, since a
// destructor must not throw and there is nothing to do about a failed free.
#include "dnn/cudnn_desc.hpp"

#include <fmt/format.h>

#include "cuda_check.hpp"

namespace kiln::cuda {
namespace {

int as_int(const DnnCheck& check, std::int64_t v, const char* what) {
  if (v < 0 || v > 0x7fffffff) {
    check.fail(fmt::format("{} = {} does not fit cuDNN's 32-bit sizes", what, v));
  }
  return static_cast<int>(v);
}

}  // namespace

cudnnDataType_t cudnn_dtype(DType dtype) noexcept {
  switch (dtype) {
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
  }
}

cudnnTensorFormat_t cudnn_format(Layout layout) noexcept {
  return layout == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

TensorDesc::TensorDesc() { check_cudnn(cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor"); }
TensorDesc::~TensorDesc() { cudnnDestroyTensorDescriptor(desc_); }

void TensorDesc::set(const DnnCheck& check, Dims4 d, DType dtype, Layout layout) {
  const int n = as_int(check, d.n, "N"), c = as_int(check, d.c, "C");
  const int h = as_int(check, d.h, "H"), w = as_int(check, d.w, "W");
  check.cudnn(cudnnSetTensor4dDescriptor(desc_, cudnn_format(layout), cudnn_dtype(dtype), n, c, h, w),
              [&] {
                return fmt::format("cudnnSetTensor4dDescriptor {} ({}, {}, {}, {}) {}",
                                   dtype_name(dtype), n, c, h, w, layout_word(layout));
              });
}

FilterDesc::FilterDesc() { check_cudnn(cudnnCreateFilterDescriptor(&desc_), "cudnnCreateFilterDescriptor"); }
FilterDesc::~FilterDesc() { cudnnDestroyFilterDescriptor(desc_); }

void FilterDesc::set(const DnnCheck& check, Dims4 d, DType dtype, Layout layout) {
  const int k = as_int(check, d.n, "K"), c = as_int(check, d.c, "C/groups");
  const int r = as_int(check, d.h, "R"), s = as_int(check, d.w, "S");
  check.cudnn(cudnnSetFilter4dDescriptor(desc_, cudnn_dtype(dtype), cudnn_format(layout), k, c, r, s),
              [&] {
                return fmt::format("cudnnSetFilter4dDescriptor {} ({}, {}, {}, {}) {}",
                                   dtype_name(dtype), k, c, r, s,
                                   layout == Layout::nhwc ? "krsc" : "oihw");
              });
}

ConvDesc::ConvDesc() {
  check_cudnn(cudnnCreateConvolutionDescriptor(&desc_), "cudnnCreateConvolutionDescriptor");
}
ConvDesc::~ConvDesc() { cudnnDestroyConvolutionDescriptor(desc_); }

PoolDesc::PoolDesc() { check_cudnn(cudnnCreatePoolingDescriptor(&desc_), "cudnnCreatePoolingDescriptor"); }
PoolDesc::~PoolDesc() { cudnnDestroyPoolingDescriptor(desc_); }

}  // namespace kiln::cuda
