// Names of ops and activations, for error messages and `kiln plugins show`.
#include "kiln/ops.hpp"

namespace kiln {

std::string_view activation_name(Activation a) noexcept {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::tanh: return "tanh";
    case Activation::sigmoid: return "sigmoid";
    case Activation::gelu: return "gelu";
  }
  return "unknown";
}

std::string_view op_name(Op op) noexcept {
  switch (op) {
    case Op::matmul: return "matmul";
    case Op::bias_grad: return "bias_grad";
    case Op::activation_forward: return "activation_forward";
    case Op::activation_backward: return "activation_backward";
    case Op::add_relu_forward: return "add_relu_forward";
    case Op::dropout_forward: return "dropout_forward";
    case Op::dropout_backward: return "dropout_backward";
    case Op::softmax_xent_forward: return "softmax_xent_forward";
    case Op::softmax_xent_backward: return "softmax_xent_backward";
    case Op::add: return "add";
    case Op::cast: return "cast";
    case Op::scale: return "scale";
    case Op::check_finite: return "check_finite";
    case Op::sgd_update: return "sgd_update";
    case Op::adam_update: return "adam_update";
    case Op::conv2d_forward: return "conv2d_forward";
    case Op::conv2d_backward_data: return "conv2d_backward_data";
    case Op::conv2d_backward_filter: return "conv2d_backward_filter";
    case Op::batchnorm_train_forward: return "batchnorm_train_forward";
    case Op::batchnorm_infer_forward: return "batchnorm_infer_forward";
    case Op::batchnorm_backward: return "batchnorm_backward";
    case Op::pool2d_forward: return "pool2d_forward";
    case Op::pool2d_backward: return "pool2d_backward";
    case Op::global_avgpool_forward: return "global_avgpool_forward";
    case Op::global_avgpool_backward: return "global_avgpool_backward";
    case Op::normalize_image: return "normalize_image";
  }
  return "unknown";
}

}  // namespace kiln
