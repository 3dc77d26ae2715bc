// Conv2d: 2-D convolution over logical NCHW activations and OIHW weights, with an optional
// per-channel bias (conv2d_bias.cpp) and a named initialisation scheme.
//
// Backward computes the filter gradient before the data gradient so a backend may reuse the
// plan's scratch; both use the plan of the forward they follow (batch size included).
#include <fmt/format.h>

#include <cmath>

#include "kiln/sdk/nn/image_check.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"

namespace kiln::nn {

namespace {

/// The weight's and bias's initialisers under `init` (the bias one is used only with a bias).
struct ConvInits {
  Init weight, bias;
};

ConvInits conv_inits(ConvInit init, std::int64_t in_c, std::int64_t out_c, std::int64_t kernel) {
  switch (init) {
    case ConvInit::kaiming_normal_fan_out_relu: {
      // torchvision ResNet: kaiming_normal_(mode="fan_out", nonlinearity="relu"), bias 0.
      const double fan_out = static_cast<double>(out_c * kernel * kernel);
      return {Init::normal(0.0f, static_cast<float>(std::sqrt(2.0 / fan_out))), Init::zeros()};
    }
    case ConvInit::pytorch_default: {
      // nn.Conv2d.reset_parameters: kaiming_uniform_(a=sqrt(5)) gives W ~ U(+-1/sqrt(fan_in)),
      // and the bias takes the same bound.
      const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in_c * kernel * kernel)));
      return {Init::uniform(-bound, bound), Init::uniform(-bound, bound)};
    }
  }
  throw ConfigError(fmt::format("unknown Conv2d init scheme {}", static_cast<int>(init)));
}

}  // namespace

Conv2d::Conv2d(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
               std::int64_t out_channels, Window window, ConvInit init, ConvBias bias,
               InputGrad input_grad)
    : store_(store), prefix_(prefix), in_c_(in_channels), out_c_(out_channels), win_(window),
      input_grad_(input_grad) {
  if (in_c_ < 1 || out_c_ < 1 || win_.kernel < 1 || win_.stride < 1 || win_.padding < 0) {
    throw ConfigError(fmt::format("{}: Conv2d(in={}, out={}, kernel={}, stride={}, padding={}) needs "
                                  "positive channels, kernel and stride and padding >= 0",
                                  prefix, in_c_, out_c_, win_.kernel, win_.stride, win_.padding));
  }
  const ConvInits inits = conv_inits(init, in_c_, out_c_, win_.kernel);
  weight_ = store_.declare(prefix + ".weight", {out_c_, in_c_, win_.kernel, win_.kernel}, inits.weight);
  if (bias == ConvBias::learned) {
    bias_ = store_.declare(prefix + ".bias", {out_c_}, inits.bias, kParamNoWeightDecay);
  }
}

Conv2dDesc Conv2d::desc(std::int64_t batch) const {
  Conv2dDesc d;
  d.n = batch;
  d.c = in_c_;
  d.h = in_.h;
  d.w = in_.w;
  d.k = out_c_;
  d.r = d.s = win_.kernel;
  d.stride_h = d.stride_w = win_.stride;
  d.pad_h = d.pad_w = win_.padding;
  d.dtype = dtype_;
  return d;
}

ImageShape Conv2d::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  if (in.c != in_c_) {
    throw ConfigError(fmt::format("{}: Conv2d expects {} input channels, the layer before gives {}",
                                  prefix_, in_c_, in.c));
  }
  require_op(backend, Op::conv2d_forward, dtype, "Conv2d");
  require_op(backend, Op::conv2d_backward_filter, dtype, "Conv2d");
  if (input_grad_ == InputGrad::compute) require_op(backend, Op::conv2d_backward_data, dtype, "Conv2d");
  in_ = in;
  dtype_ = dtype;
  max_batch_ = max_batch;
  const Conv2dDesc d = desc(max_batch);
  if (d.out_h() < 1 || d.out_w() < 1) {
    throw ConfigError(fmt::format("{}: a {}x{} input is too small for a {}x{} kernel with padding {}; "
                                  "use a larger image_size",
                                  prefix_, in.h, in.w, win_.kernel, win_.kernel, win_.padding));
  }
  out_ = ImageShape{out_c_, d.out_h(), d.out_w()};
  backend_ = &backend;
  // Outputs in the layout the backend's convolutions read and write without reordering.
  y_ = backend.allocate({max_batch, out_.c, out_.h, out_.w}, dtype, MemoryKind::device)
           .with_layout(backend.activation_layout(dtype));
  if (input_grad_ == InputGrad::compute) {
    dx_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
  }
  if (has_bias()) {
    require_op(backend, Op::matmul, dtype, "Conv2d with bias");
    require_op(backend, Op::bias_grad, dtype, "Conv2d with bias");
    // As many ones as one batch has output pixels: the outer products of conv2d_bias.cpp.
    ones_ = backend.allocate({max_batch * out_.h * out_.w}, dtype, MemoryKind::device);
    backend.fill(ones_, 1.0);
  }
  return out_;
}

Tensor Conv2d::forward(const Tensor& x) {
  detail::check_built(backend_, "Conv2d", prefix_);
  detail::check_image(x, in_, max_batch_, "Conv2d", prefix_, "input");
  const std::int64_t b = x.dim(0);
  plan_ = &plans_.get(b, [&](std::int64_t n) { return backend_->plan_conv2d(desc(n)); });
  x_saved_ = x;
  Tensor y = y_.rows(0, b);
  backend_->conv2d_forward(*plan_, y, x, store_[weight_].compute);
  if (has_bias()) add_bias(y);
  return y;
}

Tensor Conv2d::backward(const Tensor& dy, InputGrad input_grad) {
  if (plan_ == nullptr) throw BackendError(fmt::format("Conv2d '{}': backward() before forward()", prefix_));
  if (input_grad == InputGrad::compute && !dx_.defined()) {
    throw BackendError(fmt::format("Conv2d '{}': input gradient asked of a layer built without one", prefix_));
  }
  detail::check_same_batch(dy, x_saved_, "Conv2d", prefix_);
  detail::check_image(dy, out_, x_saved_.dim(0), "Conv2d", prefix_, "output gradient");
  const Parameter& w = store_[weight_];
  if (!store_.frozen(weight_)) backend_->conv2d_backward_filter(*plan_, w.grad, dy, x_saved_, Accumulate::yes);
  if (has_bias() && !store_.frozen(bias_)) bias_backward(dy);
  if (input_grad == InputGrad::skip) return Tensor();
  Tensor dx = dx_.rows(0, dy.dim(0)).with_layout(x_saved_.layout());  // as the forward's input
  backend_->conv2d_backward_data(*plan_, dx, dy, w.compute);
  return dx;
}

}  // namespace kiln::nn
