// Activation kernels: relu/tanh/sigmoid/gelu forward and backward and the residual tail
// relu(x + residual), for f32/f16/bf16 storage with f32 math, as functors over map_kernels.cuh.
// Formulas are the cpu backend's (plugins/backend-cpu/ops/activation.cpp): gelu is the tanh
// approximation; backward derivatives come from y where exact (relu y > 0, tanh 1 - y^2, sigmoid
// y (1 - y)) and from x for gelu; relu keeps NaN (x < 0 ? 0 : x) so check_finite still sees it.
#include "kernels/activation_kernels.hpp"

#include "kernels/map_kernels.cuh"

namespace kiln::cuda::kernels {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

struct ReluForward {
  __device__ float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};
struct TanhForward {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct SigmoidForward {
  __device__ float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct GeluForward {
  __device__ float operator()(float x) const {
    const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return 0.5f * x * (1.0f + t);
  }
};

// act'(saved): saved is y for relu/tanh/sigmoid, x for gelu.
struct ReluGrad {
  __device__ float operator()(float y) const { return y > 0.0f ? 1.0f : 0.0f; }
};
struct TanhGrad {
  __device__ float operator()(float y) const { return 1.0f - y * y; }
};
struct SigmoidGrad {
  __device__ float operator()(float y) const { return y * (1.0f - y); }
};
struct GeluGrad {
  __device__ float operator()(float x) const {
    const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    const float t = tanhf(inner);
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
  }
};

/// dx = dy * grad(saved).
template <class Grad>
struct Backward {
  __device__ float operator()(float dy, float saved) const { return dy * Grad{}(saved); }
};
/// dx = dx + dy * grad(saved).
template <class Grad>
struct BackwardAccumulate {
  __device__ float operator()(float dx, float dy, float saved) const {
    return dx + dy * Grad{}(saved);
  }
};

struct AddRelu {
  __device__ float operator()(float x, float r) const {
    const float v = x + r;
    return v < 0.0f ? 0.0f : v;
  }
};

template <class T, class Grad>
void backward(T* dx, const T* dy, const T* saved, std::int64_t n, Accumulate acc,
              cudaStream_t stream) {
  if (acc == Accumulate::yes) {
    launch_map3(dx, dx, dy, saved, n, BackwardAccumulate<Grad>{}, stream, "activation_backward");
  } else {
    launch_map2(dx, dy, saved, n, Backward<Grad>{}, stream, "activation_backward");
  }
}

}  // namespace

void activation_forward(void* y, const void* x, std::int64_t n, DType dtype, Activation act,
                        cudaStream_t stream) {
  with_float_type(dtype, "activation_forward", [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(y);
    const T* in = static_cast<const T*>(x);
    constexpr const char* op = "activation_forward";
    switch (act) {
      case Activation::relu: launch_map1(out, in, n, ReluForward{}, stream, op); return;
      case Activation::tanh: launch_map1(out, in, n, TanhForward{}, stream, op); return;
      case Activation::sigmoid: launch_map1(out, in, n, SigmoidForward{}, stream, op); return;
      case Activation::gelu: launch_map1(out, in, n, GeluForward{}, stream, op); return;
    }
  });
}

void activation_backward(void* dx, const void* dy, const void* saved, std::int64_t n, DType dtype,
                         Activation act, Accumulate acc, cudaStream_t stream) {
  with_float_type(dtype, "activation_backward", [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dx);
    const T* g = static_cast<const T*>(dy);
    const T* s = static_cast<const T*>(saved);
    switch (act) {
      case Activation::relu: backward<T, ReluGrad>(out, g, s, n, acc, stream); return;
      case Activation::tanh: backward<T, TanhGrad>(out, g, s, n, acc, stream); return;
      case Activation::sigmoid: backward<T, SigmoidGrad>(out, g, s, n, acc, stream); return;
      case Activation::gelu: backward<T, GeluGrad>(out, g, s, n, acc, stream); return;
    }
  });
}

void add_relu_forward(void* y, const void* x, const void* residual, std::int64_t n, DType dtype,
                      cudaStream_t stream) {
  with_float_type(dtype, "add_relu_forward", [&](auto tag) {
    using T = decltype(tag);
    launch_map2(static_cast<T*>(y), static_cast<const T*>(x), static_cast<const T*>(residual), n,
                AddRelu{}, stream, "add_relu_forward");
  });
}

}  // namespace kiln::cuda::kernels
