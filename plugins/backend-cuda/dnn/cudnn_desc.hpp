// Owning wrappers of the cuDNN descriptors the dnn ops keep in their plans (tensor, filter,
// convolution, pooling): created once, destroyed with the plan, never copied.
//
// Decisions: a 4-D image descriptor is always set from the LOGICAL (N, C, H, W) sizes plus the
// Layout tag (row_major -> CUDNN_TENSOR_NCHW, nhwc -> CUDNN_TENSOR_NHWC), so cuDNN reads each
// tensor exactly as the contract says it sits in memory. Filters are OIHW (row_major) or KRSC
// (nhwc, the tensor-core friendly order the plan converts weights into for NHWC convolutions).
// Setting a descriptor throws through DnnCheck with the op and the sizes.
#pragma once

#include <cstdint>

#include <cudnn.h>

#include "dnn/dnn_check.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// cuDNN's data type for f32, f16 and bf16 (the dtypes the dnn ops accept).
cudnnDataType_t cudnn_dtype(DType dtype) noexcept;
/// cuDNN's tensor format for an image layout (row_major -> NCHW, nhwc -> NHWC).
cudnnTensorFormat_t cudnn_format(Layout layout) noexcept;

/// Logical sizes of a 4-D image tensor (or of an OIHW filter as (K, C, R, S)).
struct Dims4 {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t numel() const noexcept { return n * c * h * w; }
};

class TensorDesc {
 public:
  TensorDesc();
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;

  /// Sets it to a (n, c, h, w) tensor of `dtype` stored in `layout`.
  void set(const DnnCheck& check, Dims4 dims, DType dtype, Layout layout);
  cudnnTensorDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc();
  ~FilterDesc();
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;

  /// (k, c/groups, r, s) filters of `dtype`, OIHW for row_major and KRSC for nhwc.
  void set(const DnnCheck& check, Dims4 dims, DType dtype, Layout layout);
  cudnnFilterDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc();
  ~ConvDesc();
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

class PoolDesc {
 public:
  PoolDesc();
  ~PoolDesc();
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  cudnnPoolingDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

}  // namespace kiln::cuda
