// SGD and Adam/AdamW as fused per-segment Backend updates.
#include "kiln/train/optimizer.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "kiln/errors.hpp"

namespace kiln::train {
namespace {

// Keys every optimizer takes, then each type's own; a key of another type is an unknown key
// (with did-you-mean and file:line) like any other, and config.toml holds only keys that apply.
constexpr kiln_param_spec_v1 kSgdSchema[] = {
    {"lr", KILN_PARAM_FLOAT, "0.001", nullptr, "Base learning rate (the schedule scales it).", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"weight_decay", KILN_PARAM_FLOAT, "0.0", nullptr, "L2 penalty; never applied to biases or BN parameters.", "0", nullptr},
    {"momentum", KILN_PARAM_FLOAT, "0.0", nullptr, "Momentum factor.", "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"dampening", KILN_PARAM_FLOAT, "0.0", nullptr, "Dampening for momentum.", "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"nesterov", KILN_PARAM_BOOL, "false", nullptr, "Nesterov momentum."},
    {"clip_grad_norm", KILN_PARAM_FLOAT, "0.0", nullptr,
     "Clip gradients to this global L2 norm after the all-reduce and loss-scale unscaling; 0 = off.", "0", nullptr},
};

constexpr kiln_param_spec_v1 kAdamSchema[] = {
    {"lr", KILN_PARAM_FLOAT, "0.001", nullptr, "Base learning rate (the schedule scales it).", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"weight_decay", KILN_PARAM_FLOAT, "0.0", nullptr,
     "L2 penalty (adam) or decoupled decay (adamw); never applied to biases or BN parameters.", "0", nullptr},
    {"beta1", KILN_PARAM_FLOAT, "0.9", nullptr, "Decay of the first moment.", "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"beta2", KILN_PARAM_FLOAT, "0.999", nullptr, "Decay of the second moment.", "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"eps", KILN_PARAM_FLOAT, "1e-8", nullptr, "Term added to the denominator.", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"clip_grad_norm", KILN_PARAM_FLOAT, "0.0", nullptr,
     "Clip gradients to this global L2 norm after the all-reduce and loss-scale unscaling; 0 = off.", "0", nullptr},
};

float positive(const ParamMap& t, const char* key) {
  const double v = t.get_float(key);
  if (!(v > 0)) throw ConfigError(fmt::format("{} must be > 0, got {}", t.where(key), v));
  return static_cast<float>(v);
}

float in_unit(const ParamMap& t, const char* key) {
  const double v = t.get_float(key);
  if (!(v >= 0 && v < 1)) throw ConfigError(fmt::format("{} must be in [0, 1), got {}", t.where(key), v));
  return static_cast<float>(v);
}

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const ParamMap& t) {
    step_.lr = positive(t, "lr");
    step_.momentum = in_unit(t, "momentum");
    step_.dampening = in_unit(t, "dampening");
    step_.nesterov = t.get_bool("nesterov") ? SgdStep::Nesterov::yes : SgdStep::Nesterov::no;
    weight_decay_ = static_cast<float>(t.get_float("weight_decay"));
    if (weight_decay_ < 0) throw ConfigError(t.where("weight_decay") + " must be >= 0");
    if (step_.nesterov == SgdStep::Nesterov::yes && (step_.momentum <= 0 || step_.dampening != 0)) {
      throw ConfigError(t.where("nesterov") + " needs momentum > 0 and dampening = 0 (as in PyTorch)");
    }
  }
  void step(Backend& backend, std::span<const Parameter> params, float lr) override {
    auto& segs = segments(backend, params, step_.momentum > 0 ? 1 : 0);
    SgdStep s = step_;
    s.lr = lr;
    // PyTorch starts the momentum buffer as a copy of the first gradient, undamped; with a
    // zero buffer that is the same as no dampening on the first step.
    if (steps_ == 0) s.dampening = 0;
    for (auto& seg : segs) {
      s.weight_decay = seg.weight_decay;
      backend.sgd_update(seg.value, seg.state[0], seg.grad, s);
    }
    ++steps_;
  }
  std::vector<std::string> state_names() const override {
    if (step_.momentum > 0) return {"momentum_buffer"};
    return {};
  }
  std::string describe() const override {
    return fmt::format("sgd(momentum={}, dampening={}, nesterov={}, weight_decay={})", step_.momentum,
                       step_.dampening, step_.nesterov == SgdStep::Nesterov::yes, weight_decay_);
  }

 private:
  SgdStep step_;
};

class Adam final : public Optimizer {
 public:
  Adam(const ParamMap& t, AdamStep::Decay decay) {
    step_.lr = positive(t, "lr");
    step_.beta1 = in_unit(t, "beta1");
    step_.beta2 = in_unit(t, "beta2");
    step_.eps = positive(t, "eps");
    step_.decay = decay;
    weight_decay_ = static_cast<float>(t.get_float("weight_decay"));
    if (weight_decay_ < 0) throw ConfigError(t.where("weight_decay") + " must be >= 0");
  }
  void step(Backend& backend, std::span<const Parameter> params, float lr) override {
    auto& segs = segments(backend, params, 2);
    AdamStep s = step_;
    s.lr = lr;
    s.step = steps_ + 1;
    for (auto& seg : segs) {
      s.weight_decay = seg.weight_decay;
      backend.adam_update(seg.value, seg.state[0], seg.state[1], seg.grad, s);
    }
    ++steps_;
  }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::string describe() const override {
    return fmt::format("{}(beta1={}, beta2={}, eps={}, weight_decay={})",
                       step_.decay == AdamStep::Decay::decoupled ? "adamw" : "adam", step_.beta1,
                       step_.beta2, step_.eps, weight_decay_);
  }

 private:
  AdamStep step_;
};

}  // namespace

std::span<const std::string_view> optimizer_types() {
  static constexpr std::string_view kTypes[] = {"sgd", "adam", "adamw"};
  return kTypes;
}

std::span<const kiln_param_spec_v1> optimizer_schema(const std::string& type) {
  if (type == "sgd") return kSgdSchema;
  if (type == "adam" || type == "adamw") return kAdamSchema;
  throw ConfigError(fmt::format("optimizer.type = '{}' is not one of sgd, adam, adamw", type));
}

Optimizer::~Optimizer() = default;

std::vector<Optimizer::Segment>& Optimizer::segments(Backend& backend, std::span<const Parameter> params,
                                                     int num_states) {
  if (built_) return segments_;
  built_ = true;
  // State arenas, one per distinct parameter storage, mirroring its layout.
  std::vector<std::pair<const Storage*, std::vector<Tensor>>> states;
  auto state_for = [&](const Tensor& value) -> std::vector<Tensor>& {
    for (auto& s : states) {
      if (s.first == value.storage().get()) return s.second;
    }
    std::vector<Tensor> arenas;
    const std::int64_t elems = static_cast<std::int64_t>(value.storage()->bytes() / dtype_size(value.dtype()));
    for (int k = 0; k < num_states; ++k) {
      arenas.push_back(backend.allocate({elems}, value.dtype(), MemoryKind::device));
      backend.fill(arenas.back(), 0.0);
    }
    states.emplace_back(value.storage().get(), std::move(arenas));
    return states.back().second;
  };
  auto slice = [](const Tensor& whole_like, const Tensor& first, std::int64_t elems) {
    return Tensor(whole_like.storage(), {elems}, first.dtype(), first.offset_bytes());
  };

  std::size_t i = 0;
  while (i < params.size()) {
    const Parameter& first = params[i];
    if (excluded(first)) {
      ++i;
      continue;
    }
    const float wd = (first.flags & kParamNoWeightDecay) ? 0.0f : weight_decay_;
    std::size_t j = i + 1;
    // Extend while the next parameter is not excluded and lives in the same storage, after this
    // one, with equal decay (a segment spanning an excluded parameter would update it).
    while (j < params.size() && !excluded(params[j]) && params[j].value.storage() == first.value.storage() &&
           params[j].value.offset_bytes() > params[j - 1].value.offset_bytes() &&
           ((params[j].flags & kParamNoWeightDecay) ? 0.0f : weight_decay_) == wd) {
      ++j;
    }
    const Parameter& last = params[j - 1];
    const std::size_t esize = dtype_size(first.value.dtype());
    const std::int64_t elems = static_cast<std::int64_t>(
        (last.value.offset_bytes() + last.value.bytes() - first.value.offset_bytes()) / esize);
    Segment seg;
    seg.value = slice(first.value, first.value, elems);
    seg.grad = Tensor(first.grad.storage(), {elems}, first.grad.dtype(),
                      first.grad.offset_bytes());
    auto& st = state_for(first.value);
    for (int k = 0; k < num_states; ++k) {
      seg.state[k] = Tensor(st[static_cast<std::size_t>(k)].storage(), {elems}, first.value.dtype(),
                            first.value.offset_bytes());
    }
    seg.weight_decay = wd;
    segments_.push_back(std::move(seg));
    i = j;
  }
  return segments_;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_views(Backend& backend,
                                                                   std::span<const Parameter> params) {
  const auto names = state_names();
  auto& segs = segments(backend, params, static_cast<int>(names.size()));
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t k = 0; k < names.size(); ++k) {
    for (const Parameter& p : params) {
      if (excluded(p)) continue;
      // The state arenas mirror the parameter storage, so a parameter's state sits at the same
      // byte offset in the state arena of the segment that covers it.
      for (const auto& seg : segs) {
        const std::size_t lo = seg.value.offset_bytes(), hi = lo + seg.value.bytes();
        if (seg.value.storage() != p.value.storage() || p.value.offset_bytes() < lo || p.value.offset_bytes() >= hi) {
          continue;
        }
        out.emplace_back(names[k] + "." + p.name, Tensor(seg.state[k].storage(), p.value.shape(), p.value.dtype(),
                                                         p.value.offset_bytes()));
        break;
      }
    }
  }
  return out;
}

void Optimizer::exclude(std::set<std::string> names) {
  if (built_) throw std::logic_error("Optimizer::exclude called after the optimizer built its segments");
  excluded_ = std::move(names);
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const ParamMap& table) {
  if (type == "sgd") return std::make_unique<Sgd>(table);
  if (type == "adam" || type == "adamw") {
    return std::make_unique<Adam>(table, type == "adam" ? AdamStep::Decay::coupled : AdamStep::Decay::decoupled);
  }
  throw ConfigError(fmt::format("optimizer.type = '{}' is not one of sgd, adam, adamw", type));
}

}  // namespace kiln::train
