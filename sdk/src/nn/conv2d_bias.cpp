// Conv2d's optional per-channel bias, written with the contract's GEMM ops instead of an op of its
// own (Caffe's way): adding b (K) to every output pixel is the rank-1 update ones x b^T, and its
// gradient, dy summed over (B, P, Q), is a column sum.
//
// Channels-last y (B, K, P, Q) is, byte for byte, a row-major (B P Q, K) matrix: one matmul
// adds ones(BPQ, 1) x b(1, K) and one bias_grad sums its rows. NCHW y is, per image, a (K, PQ)
// matrix: one matmul per image adds b(K, 1) x ones(1, PQ), and db(K, 1) += dy_n(K, PQ) x
// ones(PQ, 1). The bias is read from its compute copy (the GEMM's operands share a dtype); its
// gradient accumulates in f32 like every parameter gradient.
#include "kiln/sdk/nn/cnn_layers.hpp"

namespace kiln::nn {
namespace {

/// The bytes of a channels-last (B, K, P, Q) tensor as the row-major (B P Q, K) matrix they are.
Tensor pixels_by_channels(const Tensor& t) {
  return t.with_layout(Layout::row_major).reshape({t.dim(0) * t.dim(2) * t.dim(3), t.dim(1)});
}

}  // namespace

void Conv2d::add_bias(const Tensor& y) const {
  const Tensor& b = store_[bias_].compute;
  const std::int64_t batch = y.dim(0), k = out_c_, pq = out_.h * out_.w;
  if (y.layout() == Layout::nhwc) {
    backend_->matmul(pixels_by_channels(y), ones_.view(0, {batch * pq, 1}), Transpose::no,
                     b.view(0, {1, k}), Transpose::no, 1.0f, 1.0f, Tensor());
    return;
  }
  for (std::int64_t n = 0; n < batch; ++n) {
    backend_->matmul(y.view(n * k * pq, {k, pq}), b.view(0, {k, 1}), Transpose::no,
                     ones_.view(0, {1, pq}), Transpose::no, 1.0f, 1.0f, Tensor());
  }
}

void Conv2d::bias_backward(const Tensor& dy) const {
  const Tensor& db = store_[bias_].grad;
  const std::int64_t batch = dy.dim(0), k = out_c_, pq = out_.h * out_.w;
  if (dy.layout() == Layout::nhwc) {
    backend_->bias_grad(db, pixels_by_channels(dy), Accumulate::yes);
    return;
  }
  for (std::int64_t n = 0; n < batch; ++n) {
    backend_->matmul(db.view(0, {k, 1}), dy.view(n * k * pq, {k, pq}), Transpose::no,
                     ones_.view(0, {pq, 1}), Transpose::no, 1.0f, 1.0f, Tensor());
  }
}

}  // namespace kiln::nn
