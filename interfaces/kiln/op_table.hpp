// The one list of Backend ops. Everything that enumerates ops is generated from KILN_OPS: the Op
// enum and op_name() (ops.hpp, sdk/src/contract/ops.cpp), kOpCount and kAllOps (what tests walk
// to prove every op has a conformance case, a default refusal and a row in each backend's
// support table). Adding an op means: one line here, its virtual (and default refusal) in
// backend.hpp, its shared argument check in kiln/sdk/op_args.hpp, one row in each backend's
// op table (a compile-time check refuses a table that misses it) and a conformance case
// (test_backend_conformance fails without one).
//
// X(name): `name` is the enumerator, the op's name in messages, and the Backend method that
// implements it. Append only: Op's values are fixed by their position.
#pragma once

#define KILN_OPS(X)          \
  X(matmul)                    \
  X(bias_grad)                 \
  X(activation_forward)        \
  X(activation_backward)       \
  X(add_relu_forward)          \
  X(dropout_forward)           \
  X(dropout_backward)          \
  X(softmax_xent_forward)      \
  X(softmax_xent_backward)     \
  X(add)                       \
  X(cast)                      \
  X(scale)                     \
  X(check_finite)              \
  X(sgd_update)                \
  X(adam_update)               \
  X(conv2d_forward)            \
  X(conv2d_backward_data)      \
  X(conv2d_backward_filter)    \
  X(batchnorm_train_forward)   \
  X(batchnorm_infer_forward)   \
  X(batchnorm_backward)        \
  X(pool2d_forward)            \
  X(pool2d_backward)           \
  X(global_avgpool_forward)    \
  X(global_avgpool_backward)   \
  X(normalize_image)           \
  X(convert_layout)            \
  X(batchnorm_stats)           \
  X(batchnorm_backward_reduce) \
  X(batchnorm_backward_elemt)  \
  X(top_k_hits)                \
  X(lerp)
