// Flat arenas for parameters and gradients; host-side seeded initialisation.
#include "kiln/sdk/nn/parameter_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "kiln/errors.hpp"
#include "kiln/rng.hpp"
#include "kiln/sdk/checked_size.hpp"

namespace kiln::nn {
namespace {

constexpr std::int64_t kAlignElements = 16;  // 64 bytes of f32

std::uint64_t name_hash(const std::string& name) {
  // FNV-1a: stable across platforms and standard libraries (std::hash is not).
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

void fill_init(float* out, std::int64_t n, const Init& init, std::uint64_t seed) {
  SampleRng rng(seed);
  switch (init.kind) {
    case Init::Kind::zeros:
      for (std::int64_t i = 0; i < n; ++i) out[i] = 0.0f;
      break;
    case Init::Kind::ones:
      for (std::int64_t i = 0; i < n; ++i) out[i] = 1.0f;
      break;
    case Init::Kind::uniform:
      for (std::int64_t i = 0; i < n; ++i) out[i] = rng.uniform(init.a, init.b);
      break;
    case Init::Kind::normal:
      // Box-Muller; u1 kept away from 0 so log() is finite.
      for (std::int64_t i = 0; i < n; ++i) {
        const double u1 = (static_cast<double>(rng.next_u64() >> 11) + 1.0) / 9007199254740993.0;
        const double u2 = static_cast<double>(rng.next_u64() >> 11) / 9007199254740992.0;
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
        out[i] = init.a + init.b * static_cast<float>(z);
      }
      break;
  }
}

}  // namespace

std::size_t ParameterStore::declare(std::string name, Shape shape, Init init, std::uint32_t flags) {
  if (allocated()) throw BackendError("parameter '" + name + "' declared after the arenas were allocated");
  for (const auto& p : params_) {
    if (p.name == name) throw ConfigError("two parameters are named '" + name + "'; names must be unique");
  }
  // Sized before anything is recorded, so an overflow leaves the store as it was.
  const std::int64_t n = shape_numel(shape);
  const std::string what = "the parameter arena with '" + name + "' " + shape_string(shape);
  const char* hint = "a model parameter (a width, depth or class count) is far too large";
  const std::int64_t padded =
      sdk::mul_or_throw(sdk::add_or_throw(n, kAlignElements - 1, what, hint) / kAlignElements, kAlignElements,
                        what, hint);
  const std::int64_t end = sdk::add_or_throw(arena_elements_, padded, what, hint);
  if (!sdk::checked_bytes(end, sizeof(double))) {
    throw ConfigError(what + " needs more bytes than fit in 64 bits; " + hint);
  }
  Parameter p;
  p.name = std::move(name);
  p.flags = flags;
  params_.push_back(std::move(p));
  declared_.push_back(Declared{init});
  offsets_.push_back(arena_elements_);
  arena_elements_ = end;
  shapes_pending_.push_back(std::move(shape));
  return params_.size() - 1;
}

void ParameterStore::allocate(Backend& backend, DType param_dtype, DType compute_dtype,
                              std::uint64_t seed) {
  if (allocated()) throw BackendError("ParameterStore::allocate called twice");
  if (param_dtype != DType::f32) {
    throw UnsupportedError(fmt::format("master weights in {} are not supported; use f32",
                                       dtype_name(param_dtype)));
  }
  const Shape arena_shape{arena_elements_};
  // A shape of its own, moved in: copying arena_shape made GCC 14 warn (-Warray-bounds, a false
  // positive inside libstdc++'s vector copy).
  Tensor host = host_tensor(Shape{arena_elements_}, DType::f32);
  float* h = host.data_as<float>();
  for (std::int64_t i = 0; i < arena_elements_; ++i) h[i] = 0.0f;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    fill_init(h + offsets_[i], shape_numel(shapes_pending_[i]), declared_[i].init,
              derive_seed(seed, name_hash(params_[i].name)));
  }
  value_arena_ = backend.allocate(arena_shape, param_dtype, MemoryKind::device);
  grad_arena_ = backend.allocate(arena_shape, param_dtype, MemoryKind::device);
  backend.copy(host, value_arena_);
  backend.fill(grad_arena_, 0.0);
  compute_arena_ = value_arena_;
  if (compute_dtype != param_dtype) {
    compute_arena_ = backend.allocate(arena_shape, compute_dtype, MemoryKind::device);
    backend.cast(compute_arena_, value_arena_);
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    params_[i].value = value_arena_.view(offsets_[i], shapes_pending_[i]);
    params_[i].grad = grad_arena_.view(offsets_[i], shapes_pending_[i]);
    params_[i].compute = compute_arena_.view(offsets_[i], shapes_pending_[i]);
  }
}

void ParameterStore::set_frozen(const std::function<bool(std::string_view)>& frozen) {
  first_trainable_ = params_.size();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const bool is_frozen = frozen && frozen(params_[i].name);
    if (is_frozen) {
      params_[i].flags |= kParamFrozen;
    } else {
      params_[i].flags &= ~static_cast<std::uint32_t>(kParamFrozen);
      first_trainable_ = std::min(first_trainable_, i);
    }
  }
}

void ParameterStore::set_frozen(const ModelBuildContext& ctx) {
  set_frozen(ctx.frozen);
  frozen_bn_ = ctx.frozen_bn;
}

void ParameterStore::zero_grads(Backend& backend) const {
  if (grad_arena_.defined()) backend.fill(grad_arena_, 0.0);
}

}  // namespace kiln::nn
