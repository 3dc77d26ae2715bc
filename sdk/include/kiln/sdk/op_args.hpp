// The argument check of every op that op_descs.hpp does not cover, shared by every backend (cpu,
// cuda, third-party), so a wrong call is refused by the same rule with the same words whatever
// the device: "cuda backend, dropout_forward: mask is f32(15) but must be u8; fix the arguments
// the calling layer passes". A backend calls the check first thing in its op, with an OpCheck
// made for its name and memory, and keeps only what is truly its own: limits of its kernels
// (cuda: 2^31 rows) and checks of values it can read on the host (cpu: label ranges).
//
// Where the two backends' old copies disagreed, the contract (backend.hpp, ops.hpp) decided:
// optimizer buffers, flags, labels and logits are flat/2-D row-major tensors; image operands of
// one element-wise call share a layout (dropout's mask included: elements pair by memory
// position); weights are OIHW row-major; max pooling's backward gets the forward's x and y.
#pragma once

#include <cstdint>

#include "kiln/ops.hpp"
#include "kiln/sdk/op_check.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "kiln/tensor.hpp"

namespace kiln::sdk {

// ---- element-wise (sdk/src/contract/op_args_elementwise.cpp) ---------------------------------
/// x, y float, same dtype, shape and layout; a known activation.
void check_activation_forward(const OpCheck& check, const Tensor& y, const Tensor& x, Activation act);
/// dx, dy float, same dtype/shape/layout; the saved tensor the derivative reads (y for
/// relu/tanh/sigmoid, x for gelu) defined and alike; the other, if defined, of dy's shape.
/// Returns the saved tensor.
const Tensor& check_activation_backward(const OpCheck& check, const Tensor& dx, const Tensor& dy,
                                        const Tensor& x, const Tensor& y, Activation act);
void check_add_relu_forward(const OpCheck& check, const Tensor& y, const Tensor& x, const Tensor& residual);
/// x, y float alike; mask u8 with x's element count and layout; p in [0, 1).
void check_dropout_forward(const OpCheck& check, const Tensor& y, const Tensor& mask, const Tensor& x, float p);
void check_dropout_backward(const OpCheck& check, const Tensor& dx, const Tensor& dy, const Tensor& mask, float p);
void check_add(const OpCheck& check, const Tensor& c, const Tensor& a, const Tensor& b);
/// f32 <-> bf16/f16 or a same-dtype copy; equal element count and layout.
void check_cast(const OpCheck& check, const Tensor& dst, const Tensor& src);
void check_scale(const OpCheck& check, const Tensor& t);
/// flag i32 with one element (row-major); t float.
void check_check_finite(const OpCheck& check, const Tensor& flag, const Tensor& t);
/// dst and src 4-D, same dtype (f32, bf16, f16) and logical shape, each row_major or nhwc.
void check_convert_layout(const OpCheck& check, const Tensor& dst, const Tensor& src);

// ---- training: bias_grad, loss, optimizers (sdk/src/contract/op_args_training.cpp) ------------
/// db f32 (N); dy float (M, N).
void check_bias_grad(const OpCheck& check, const Tensor& db, const Tensor& dy);
/// The (rows, classes) of a softmax cross-entropy call.
struct RowsClasses {
  std::int64_t rows = 0, classes = 0;
};
/// logits/probs f32 (B, K) with K > 0, labels i32 (B), stats f32 (2), smoothing in [0, 1).
RowsClasses check_softmax_xent_forward(const OpCheck& check, const Tensor& probs, const Tensor& stats,
                                       const Tensor& logits, const Tensor& labels, float label_smoothing);
RowsClasses check_softmax_xent_backward(const OpCheck& check, const Tensor& dlogits, const Tensor& probs,
                                        const Tensor& labels, float label_smoothing);
/// logits f32 (B, K) with K > 0, labels i32 (B), count f32 (1), k >= 1.
RowsClasses check_top_k_hits(const OpCheck& check, const Tensor& count, const Tensor& logits, const Tensor& labels,
                             std::int64_t k);
/// param, grad (and momentum when step.momentum != 0) f32 of one shape, row-major.
void check_sgd_update(const OpCheck& check, const Tensor& param, const Tensor& momentum, const Tensor& grad,
                      const SgdStep& step);
/// param, m, v, grad f32 of one shape, row-major; step >= 1.
void check_adam_update(const OpCheck& check, const Tensor& param, const Tensor& m, const Tensor& v,
                       const Tensor& grad, const AdamStep& step);
/// dst, src f32 of one shape, row-major; weight finite in [0, 1].
void check_lerp(const OpCheck& check, const Tensor& dst, const Tensor& src, float weight);

// ---- image ops (sdk/src/contract/op_args_image.cpp) -------------------------------------------
/// Operands of a planned convolution: activations (N, C, H, W) / (N, K, P, Q) in either image
/// layout, weights OIHW row-major, each in f32 or the plan's dtype.
void check_conv2d_forward(const OpCheck& check, const Conv2dDesc& d, const Tensor& y, const Tensor& x,
                          const Tensor& w);
void check_conv2d_backward_data(const OpCheck& check, const Conv2dDesc& d, const Tensor& dx,
                                const Tensor& dy, const Tensor& w);
void check_conv2d_backward_filter(const OpCheck& check, const Conv2dDesc& d, const Tensor& dw,
                                  const Tensor& dy, const Tensor& x);
/// y and x in the plan's dtype and shapes (one layout unless the backend accepts mixing).
void check_pool2d_forward(const OpCheck& check, const Pool2dDesc& d, MixedLayouts mixed, const Tensor& y,
                          const Tensor& x);
/// dx, dy as the forward's x, y; x and y required for max pooling (the argmax is theirs),
/// optional for average pooling, checked when given.
void check_pool2d_backward(const OpCheck& check, const Pool2dDesc& d, MixedLayouts mixed, const Tensor& dx,
                           const Tensor& dy, const Tensor& x, const Tensor& y);
/// x float (N, C, H, W) with H W > 0 in either layout; y (N, C) row-major in x's dtype.
void check_global_avgpool_forward(const OpCheck& check, const Tensor& y, const Tensor& x);
void check_global_avgpool_backward(const OpCheck& check, const Tensor& dx, const Tensor& dy);
/// src u8 (N, H, W, 3) row-major; dst float (N, 3, H, W) in either layout; every std > 0.
void check_normalize_image(const OpCheck& check, const Tensor& dst, const Tensor& src,
                           const ImageNormalize& norm);

}  // namespace kiln::sdk
