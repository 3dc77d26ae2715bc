// convert_layout: dst = src's logical (N, C, H, W) elements in dst's layout, through
// cudnnTransformTensor (dnn/staging.hpp's convert_4d, the same path the cuDNN ops use to stage a
// caller's tensors), so NCHW <-> NHWC in f32, bf16 and f16 needs no kernel of its own. An equal
// layout is a device-to-device copy. Enqueued on the compute stream.
#include "cuda_backend.hpp"
#include "dnn/dnn_check.hpp"
#include "dnn/staging.hpp"
#include "kiln/sdk/op_args.hpp"

namespace kiln::cuda {

void CudaBackend::convert_layout(const Tensor& dst, const Tensor& src) {
  const DnnCheck check(Op::convert_layout);
  sdk::check_convert_layout(check, dst, src);
  const Dims4 dims{src.dim(0), src.dim(1), src.dim(2), src.dim(3)};
  convert_4d(*this, check, dst, dst.layout(), src, src.layout(), dims, Accumulate::no);
}

}  // namespace kiln::cuda
