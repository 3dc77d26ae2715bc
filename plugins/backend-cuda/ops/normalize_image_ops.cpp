// CudaBackend::normalize_image: u8 (N, H, W, 3) batches from the DataLoader become normalised
// activations on the device, in dst's layout (row-major NCHW, or nhwc for the f16/bf16
// channels-last path). Validate (kernel_validate.hpp), then launch on the compute stream
// (kernels/normalize_image_kernels.hpp).
#include "cuda_backend.hpp"
#include "kernels/normalize_image_kernels.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) {
  const kernels::ChannelAffine affine = validate_normalize_image(dst, src, norm);
  kernels::normalize_image(dst.data(), dst.layout(), src.data_as<std::uint8_t>(), src.dim(0),
                           src.dim(1), src.dim(2), affine, dst.dtype(), compute_stream());
}

}  // namespace kiln::cuda
