// The precision-policy checks of `kiln plugins test` (see conformance_precision.hpp; what each
// check asks is listed in conformance.hpp).
//
// The checks drive a policy as the trainer does (core/train/trainer.cpp): check_backend, then
// before_forward on the parameter list, loss_scale() read before backward, and after_allreduce
// on gradients that the checks write themselves in place of backward and the all-reduce: a
// known true gradient times the scale the policy asked for, so what after_allreduce must give
// back is known exactly. The parameter list is one object for the whole run, as a model's is
// after build(): the shipped policies cache their arena runs by its address.
#include "conformance_precision.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "kiln/errors.hpp"
#include "kiln/model.hpp"
#include "kiln/rng.hpp"
#include "kiln/sdk/half.hpp"

namespace kiln::cli {
namespace {

/// One vector of f32 values per parameter.
using Values = std::vector<std::vector<float>>;

/// The parameters every policy is given: odd sizes; three in one arena, each starting on a
/// 64-byte boundary with zero gaps between (nn::ParameterStore's layout, which sdk::cast_runs
/// merges into one run), and one in a storage of its own (a model that allocates its own), so a
/// policy that handles only the first run, or only arenas, leaves something undone.
struct Declared {
  const char* name;
  Shape shape;
  bool own_storage;
};
const Declared kDeclared[] = {{"layer.weight", {5, 7}, false},
                              {"layer.bias", {3}, false},
                              {"head.weight", {1, 13}, false},
                              {"norm.weight", {2}, true}};
constexpr std::int64_t kAlign = 16;  // f32 elements in 64 bytes

/// How far an unscaled gradient may be from the true one, relative to it: two f32 roundings (g
/// times the scale, then times its reciprocal) of a scale that is not a power of two.
constexpr double kUnscaleTolerance = 1e-6;
constexpr int kUnscaleSteps = 3;
/// Clean steps the `scale` check waits at most for the scale to grow (the fp16 policy grows it
/// after 2000, which takes ~0.1 s here), and the time it gives them.
constexpr int kMaxCleanSteps = 5000;
constexpr double kCleanStepSeconds = 1.0;

bool is_16_bit(DType compute) { return compute == DType::bf16 || compute == DType::f16; }

/// The bits of `v` rounded to `compute` to nearest, ties to even: the SDK's conversion, which
/// the backends' casts use.
std::uint32_t rounded_bits(float v, DType compute) {
  if (compute == DType::bf16) return sdk::f32_to_bf16(v);
  if (compute == DType::f16) return sdk::f32_to_f16(v);
  return std::bit_cast<std::uint32_t>(v);
}

float decoded(std::uint32_t bits, DType compute) {
  if (compute == DType::bf16) return sdk::bf16_to_f32(static_cast<std::uint16_t>(bits));
  if (compute == DType::f16) return sdk::f16_to_f32(static_cast<std::uint16_t>(bits));
  return std::bit_cast<float>(bits);
}

/// The bits rounding toward zero gives. A float's encodings grow with its magnitude, so that is
/// the nearest-even result, or the encoding below it when that result is larger than |v|.
std::uint32_t truncated_bits(float v, DType compute) {
  const std::uint32_t r = rounded_bits(v, compute);
  if (std::isnan(v)) return r;
  return std::abs(decoded(r, compute)) > std::abs(v) ? r - 1 : r;
}

/// Masters whose compute copies say whether a cast rounds right: ties either way, values just
/// above a tie (where truncation differs), subnormals of the compute type and, for f16, values
/// past its range (65520 and beyond round to inf).
std::vector<float> cast_values(DType compute) {
  const float third = 1.0f / 3.0f;
  if (compute == DType::bf16) {
    return {0x1.01p0f,  0x1.03p0f,   0x1.0101p0f, -0x1.0101p0f, third,    -0.1f,      3.14159265f, 1e-39f,
            -5.5e-40f,  0x1.8p-133f, 0x1p-140f,   3.0e38f,      65520.0f, -1.0e5f,    0.0f,        -0.0f,
            0x1.fffp4f, 0x1.8181p-9f, 777.7f};
  }
  if (compute == DType::f16) {
    return {0x1.002p0f, 0x1.006p0f, 0x1.0022p0f, -0x1.0022p0f, third,    -0.1f,  3.14159265f, 65504.0f,
            65519.0f,   65520.0f,   1.0e5f,      -7.0e4f,      0x1p-24f, 0x1.8p-24f, 0x1p-25f,  0x1.2p-25f,
            1e-6f,      -3e-5f,     6.0e-5f,     1e-9f,        0.0f,     -0.0f,  777.7f};
  }
  return {third, -0.1f, 3.14159265f, 1e-40f, -0.0f, 3.0e38f, 65520.0f};
}

std::string format_map(const std::map<std::string, double>& m) {
  std::string out;
  for (const auto& [key, value] : m) out += fmt::format("{}{} {:g}", out.empty() ? "" : ", ", key, value);
  return "{" + out + "}";
}

/// The first key whose values differ (or that one map lacks), if any.
std::string first_difference(const std::map<std::string, double>& got, const std::map<std::string, double>& want) {
  for (const auto& [key, value] : want) {
    const auto it = got.find(key);
    if (it == got.end()) return fmt::format("lacks '{}' ({:g} was saved)", key, value);
    if (!(it->second == value)) return fmt::format("['{}'] is {:g}, not {:g}", key, it->second, value);
  }
  for (const auto& [key, value] : got) {
    if (want.count(key) == 0) return fmt::format("has '{}' = {:g}, which was not saved", key, value);
  }
  return {};
}

/// The parameter list of kDeclared on a backend, with its compute copies in one dtype; values,
/// gradients and compute copies are written and read through the backend.
class TestParameters {
 public:
  TestParameters(Backend& backend, DType compute) : backend_(backend), compute_(compute) {
    std::int64_t arena = 0;
    std::vector<std::int64_t> offsets;
    for (const Declared& d : kDeclared) {
      offsets.push_back(arena);
      if (!d.own_storage) arena += (shape_numel(d.shape) + kAlign - 1) / kAlign * kAlign;
    }
    const auto make = [&](const Shape& shape, DType dtype) {
      Tensor t = backend.allocate(shape, dtype, MemoryKind::device);
      backend.fill(t, 0.0);  // the arena's gaps are zero, as in a ParameterStore
      return t;
    };
    const Tensor values = make({arena}, DType::f32), grads = make({arena}, DType::f32);
    const Tensor copies = compute == DType::f32 ? values : make({arena}, compute);
    for (std::size_t i = 0; i < std::size(kDeclared); ++i) {
      const Declared& d = kDeclared[i];
      Parameter p;
      p.name = d.name;
      if (d.own_storage) {
        p.value = make(d.shape, DType::f32);
        p.grad = make(d.shape, DType::f32);
        p.compute = compute == DType::f32 ? p.value : make(d.shape, compute);
      } else {
        p.value = values.view(offsets[i], d.shape);
        p.grad = grads.view(offsets[i], d.shape);
        p.compute = copies.view(offsets[i], d.shape);
      }
      params_.push_back(std::move(p));
    }
    backend.synchronize();
  }

  std::span<const Parameter> list() const { return params_; }
  const Parameter& operator[](std::size_t i) const { return params_[i]; }
  std::size_t size() const { return params_.size(); }
  std::int64_t values() const {
    std::int64_t n = 0;
    for (const Parameter& p : params_) n += p.value.numel();
    return n;
  }
  bool aliased() const { return compute_ == DType::f32; }

  /// Writes f32 values into every parameter's value or grad.
  void write(Tensor Parameter::*which, const Values& v) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor& t = params_[i].*which;
      Tensor host = host_tensor(t.shape(), DType::f32);
      std::copy(v[i].begin(), v[i].end(), host.data_as<float>());
      backend_.copy(host, t);
    }
    backend_.synchronize();
  }

  /// Every parameter's value or grad.
  Values read(Tensor Parameter::*which) {
    Values out;
    for (const std::vector<std::uint32_t>& bits : read_bits(which)) {
      std::vector<float> v;
      for (std::uint32_t b : bits) v.push_back(std::bit_cast<float>(b));
      out.push_back(std::move(v));
    }
    return out;
  }

  /// The raw bits (a 16-bit value widened) of every parameter's `which` tensor.
  std::vector<std::vector<std::uint32_t>> read_bits(Tensor Parameter::*which) {
    backend_.synchronize();
    std::vector<std::vector<std::uint32_t>> out;
    for (const Parameter& p : params_) {
      const Tensor& t = p.*which;
      Tensor host = host_tensor(t.shape(), t.dtype());
      backend_.copy(t, host);  // complete when it returns
      std::vector<std::uint32_t> bits(static_cast<std::size_t>(t.numel()));
      for (std::size_t k = 0; k < bits.size(); ++k) {
        bits[k] = is_16_bit(t.dtype()) ? host.data_as<std::uint16_t>()[k] : host.data_as<std::uint32_t>()[k];
      }
      out.push_back(std::move(bits));
    }
    return out;
  }

  /// Fills every compute copy with NaN, so a copy before_forward does not write shows.
  void poison_copies() {
    for (const Parameter& p : params_) backend_.fill(p.compute, std::numeric_limits<double>::quiet_NaN());
    backend_.synchronize();
  }

 private:
  Backend& backend_;
  DType compute_;
  std::vector<Parameter> params_;
};

/// `g` times `scale`, each product rounded to f32: what backward and the all-reduce leave when
/// the loss gradient was multiplied by the scale.
Values times(const Values& g, double scale) {
  Values out = g;
  for (auto& v : out) {
    for (float& x : v) x = static_cast<float>(static_cast<double>(x) * scale);
  }
  return out;
}

class PrecisionChecks {
 public:
  PrecisionChecks(const std::function<std::shared_ptr<PrecisionPolicy>()>& make, Backend& backend)
      : make_(make), backend_(backend) {}

  std::vector<CheckLine> run() {
    using Check = Verdict (PrecisionChecks::*)();
    // In order; the first two decide whether the others can run.
    static constexpr std::pair<const char*, Check> kChecks[] = {
        {"dtypes", &PrecisionChecks::dtypes},     {"backend", &PrecisionChecks::backend},
        {"cast", &PrecisionChecks::cast},         {"unscale", &PrecisionChecks::unscale},
        {"overflow", &PrecisionChecks::overflow}, {"scale", &PrecisionChecks::scale},
        {"state", &PrecisionChecks::state}};
    std::string not_run;  // why the remaining checks do not run, once dtypes or backend said so
    for (const auto& entry : kChecks) {
      const char* name = entry.first;
      const Check check = entry.second;  // not a structured binding: the lambda below captures it
      if (!not_run.empty()) {
        lines_.push_back(CheckLine{true, name, not_run, true});
        continue;
      }
      if (check == &PrecisionChecks::scale && initial_scale_ == 1.0f) {
        lines_.push_back(CheckLine{true, name, "not run: loss_scale() is 1, the policy does not scale the loss", true});
        continue;
      }
      // The compute dtype is known to be one the checks handle once dtypes passed.
      if (check == &PrecisionChecks::cast) params_ = std::make_unique<TestParameters>(backend_, compute_);
      const bool passed = step(name, [&] { return (this->*check)(); });
      const bool gate = check == &PrecisionChecks::dtypes || check == &PrecisionChecks::backend;
      if (gate && !passed) not_run = fmt::format("not run: {} failed", name);
      if (gate && passed && !refusal_.empty()) not_run = "not run: the policy refuses the cpu backend";
    }
    return lines_;
  }

 private:
  template <class Check>
  bool step(const char* name, Check&& check) {
    lines_.push_back(run_check(name, std::forward<Check>(check)));
    return lines_.back().ok;
  }

  /// A new policy, accepted by the backend, as a new run would have it.
  std::shared_ptr<PrecisionPolicy> fresh() {
    std::shared_ptr<PrecisionPolicy> p = make_();
    p->check_backend(backend_);
    return p;
  }

  /// True gradients of `seed`: random signs, magnitudes from 2^-10 to 4, so that times a scale
  /// of up to 2^24 they stay far from f32's limits.
  Values true_gradients(std::uint64_t seed) const {
    SampleRng rng(seed);
    Values g;
    for (const Parameter& p : params_->list()) {
      std::vector<float> v(static_cast<std::size_t>(p.grad.numel()));
      for (float& x : v) x = (rng.below(2) == 0 ? -1.0f : 1.0f) * std::exp2(rng.uniform(-10.0f, 2.0f));
      g.push_back(std::move(v));
    }
    return g;
  }

  /// One step whose reduced gradients are finite (`seed`'s, times the policy's scale).
  StepDecision clean_step(PrecisionPolicy& policy, std::uint64_t seed) {
    params_->write(&Parameter::grad, times(true_gradients(seed), policy.loss_scale()));
    return policy.after_allreduce(backend_, params_->list());
  }

  /// One step with `bad` at element `index` of parameter `param`, the rest finite.
  StepDecision overflow_step(PrecisionPolicy& policy, std::uint64_t seed, float bad, std::size_t param,
                             std::size_t index) {
    Values g = times(true_gradients(seed), policy.loss_scale());
    g[param][index] = bad;
    params_->write(&Parameter::grad, g);
    return policy.after_allreduce(backend_, params_->list());
  }

  Verdict dtypes() {
    policy_ = make_();
    const DType param = policy_->param_dtype();
    compute_ = policy_->compute_dtype();
    if (param != DType::f32) {
      return {false, fmt::format("param_dtype() is {}: masters are f32 (the optimizers update f32 masters, and a "
                                 "ParameterStore refuses other master dtypes)",
                                 dtype_name(param))};
    }
    if (compute_ != DType::f32 && !is_16_bit(compute_)) {
      return {false, fmt::format("compute_dtype() is {}: layers compute in f32, bf16 or f16", dtype_name(compute_))};
    }
    return {true, fmt::format("masters f32, compute {}", dtype_name(compute_))};
  }

  Verdict backend() {
    const std::string device = backend_.device().name;
    try {
      policy_->check_backend(backend_);
    } catch (const UnsupportedError& e) {
      if (std::string_view(e.what()).empty()) {
        return {false, "refuses the cpu backend with an UnsupportedError that says nothing: say why, and what to "
                       "use instead"};
      }
      refusal_ = e.what();
      return {true, fmt::format("refuses the cpu backend on {} with an UnsupportedError: {}", device, refusal_)};
    } catch (const std::exception& e) {
      return {false, fmt::format("check_backend() threw an error that is not an UnsupportedError: {}; a backend the "
                                 "policy cannot run on is refused with UnsupportedError, which the run reports "
                                 "before it starts",
                                 e.what())};
    }
    initial_scale_ = policy_->loss_scale();
    if (!std::isfinite(initial_scale_) || !(initial_scale_ > 0)) {
      return {false, fmt::format("accepts the cpu backend, but loss_scale() is {}: the trainer multiplies the loss "
                                 "gradient by it, so it must be finite and > 0",
                                 initial_scale_)};
    }
    return {true, fmt::format("accepts the cpu backend on {}; loss_scale() {:g} to start", device, initial_scale_)};
  }

  /// Masters for round `round` of the cast check: cast_values() in turn, the second round
  /// shifted and negated so every element changes.
  Values masters(int round) const {
    const std::vector<float> pool = cast_values(compute_);
    Values out;
    std::size_t k = round == 0 ? 0 : 7;
    for (const Parameter& p : params_->list()) {
      std::vector<float> v(static_cast<std::size_t>(p.value.numel()));
      for (float& x : v) x = round == 0 ? pool[k++ % pool.size()] : -pool[k++ % pool.size()];
      out.push_back(std::move(v));
    }
    return out;
  }

  /// What is wrong with a compute copy that holds `got` for master `master`.
  std::string cast_mismatch(const Parameter& p, std::size_t k, float master, std::uint32_t got, int round,
                            std::optional<float> previous) const {
    const std::uint32_t want = rounded_bits(master, compute_);
    const int digits = compute_ == DType::f32 ? 8 : 4;
    std::string text = fmt::format("'{}'[{}]: master {:.9g} has the {} copy {:.9g} (0x{:0{}x}), not {:.9g} (0x{:0{}x})",
                                   p.name, k, master, dtype_name(compute_), decoded(got, compute_), got, digits,
                                   decoded(want, compute_), want, digits);
    if (round == 0 && std::isnan(decoded(got, compute_))) {
      return text + ": before_forward did not write it (it still holds the NaN it was filled with)";
    }
    if (previous && got == rounded_bits(*previous, compute_)) {
      return text + fmt::format(": it still holds the copy of the previous master {:.9g}; before_forward must refresh "
                                "the copies every time (the optimizer changed the masters)",
                                *previous);
    }
    if (got == truncated_bits(master, compute_)) {
      return text + ": the cast truncates (rounds toward zero); the copy must be the master rounded to nearest, ties "
                    "to even";
    }
    return text + ": the copy must be the master rounded to nearest, ties to even";
  }

  Verdict cast() {
    const auto policy = fresh();
    const Values rounds[] = {masters(0), masters(1)};
    for (int round = 0; round < 2; ++round) {
      params_->write(&Parameter::value, rounds[round]);
      // The first call must write every copy; the second must rewrite the copies it wrote.
      if (round == 0 && !params_->aliased()) params_->poison_copies();
      policy->before_forward(backend_, params_->list());
      const Values after = params_->read(&Parameter::value);
      const auto copies = params_->read_bits(&Parameter::compute);
      for (std::size_t i = 0; i < params_->size(); ++i) {
        const Parameter& p = (*params_)[i];
        for (std::size_t k = 0; k < after[i].size(); ++k) {
          const float master = rounds[round][i][k];
          if (std::bit_cast<std::uint32_t>(after[i][k]) != std::bit_cast<std::uint32_t>(master)) {
            return {false, fmt::format("before_forward changed the master '{}'[{}] from {:.9g} to {:.9g}: the masters "
                                       "are the optimizer's; the policy only reads them",
                                       p.name, k, master, after[i][k])};
          }
          if (copies[i][k] != rounded_bits(master, compute_)) {
            const std::optional<float> previous = round == 1 ? std::optional(rounds[0][i][k]) : std::nullopt;
            return {false, (round == 1 ? "after the masters changed, " : "") +
                               cast_mismatch(p, k, master, copies[i][k], round, previous)};
          }
        }
      }
    }
    const std::int64_t n = params_->values();
    if (params_->aliased()) {
      return {true, fmt::format("f32 compute: the copies are the masters themselves; before_forward left all {} values "
                                "of the {} parameters as they were, twice",
                                n, params_->size())};
    }
    const char* cases = compute_ == DType::f16 ? "ties, f16 subnormals and values past f16's range"
                                               : "ties and bf16 subnormals";
    return {true, fmt::format("{} values of {} parameters (one arena and one storage of its own) rounded to {}, nearest "
                              "with ties to even ({}); refreshed after the masters changed",
                              n, params_->size(), dtype_name(compute_), cases)};
  }

  Verdict unscale() {
    const auto policy = fresh();
    std::vector<std::string> scales;
    for (int step = 0; step < kUnscaleSteps; ++step) {
      const double scale = policy->loss_scale();
      const Values g = true_gradients(100 + static_cast<std::uint64_t>(step));
      const Values scaled = times(g, scale);
      params_->write(&Parameter::grad, scaled);
      if (policy->after_allreduce(backend_, params_->list()) != StepDecision::apply) {
        return {false, fmt::format("step {}: after_allreduce skipped a step whose gradients were all finite (the true "
                                   "gradients, 2^-10 to 4 in magnitude, times loss_scale() {:g})",
                                   step + 1, scale)};
      }
      const Values got = params_->read(&Parameter::grad);
      for (std::size_t i = 0; i < got.size(); ++i) {
        for (std::size_t k = 0; k < got[i].size(); ++k) {
          const double want = g[i][k];
          if (std::abs(got[i][k] - want) <= kUnscaleTolerance * std::abs(want)) continue;
          std::string text = fmt::format("step {}: '{}'[{}] is {:.9g} after after_allreduce, not {:.9g} (it was given "
                                         "{:.9g}, the true gradient times loss_scale() {:g})",
                                         step + 1, (*params_)[i].name, k, got[i][k], want, scaled[i][k], scale);
          if (got[i][k] == scaled[i][k] && scale != 1) text += ": the gradients were not unscaled";
          return {false, text};
        }
      }
      scales.push_back(fmt::format("{:g}", scale));
    }
    if (std::all_of(scales.begin(), scales.end(), [](const std::string& s) { return s == "1"; })) {
      return {true, fmt::format("{} steps at loss_scale() 1: applied, every gradient left as it was (within {:g})",
                                kUnscaleSteps, kUnscaleTolerance)};
    }
    return {true, fmt::format("{} steps at loss_scale() {}: applied, every gradient divided back to within {:g} of the "
                              "true one",
                              kUnscaleSteps, fmt::join(scales, ", "), kUnscaleTolerance)};
  }

  Verdict overflow() {
    struct Planted {
      const char* what;
      float value;
      std::size_t param;
      std::size_t index;
    };
    // One per case, each in a fresh policy: in the arena's middle parameter, in the parameter of
    // its own storage, and at the very first element.
    const Planted cases[] = {{"+inf", std::numeric_limits<float>::infinity(), 1, 1},
                             {"NaN", std::numeric_limits<float>::quiet_NaN(), 3, 1},
                             {"-inf", -std::numeric_limits<float>::infinity(), 0, 0}};
    std::vector<std::string> places, outcomes, errors;
    std::size_t applied = 0;
    for (const Planted& c : cases) {
      const auto policy = fresh();
      const std::string where = fmt::format("{} in '{}'[{}]", c.what, (*params_)[c.param].name, c.index);
      try {
        // Without loss scaling the contract lets the check be optional (kiln/precision_policy.hpp):
        // the trainer's divergence stop covers an applied step.
        const bool scales = policy->loss_scale() != 1.0f;
        const StepDecision d = overflow_step(*policy, 200, c.value, c.param, c.index);
        if (d == StepDecision::apply && !scales) {
          outcomes.push_back(where + ": applied");
          ++applied;
          continue;
        }
        if (d == StepDecision::apply) {
          return {false, fmt::format("after_allreduce returned apply with {} (the other {} parameters finite): the "
                                     "optimizer would write it into the weights. A step whose reduced gradients are "
                                     "not finite must be skipped (StepDecision::skip) or stop the run with a "
                                     "NumericError",
                                     where, params_->size() - 1)};
        }
        outcomes.push_back(where + ": skipped");
      } catch (const NumericError& e) {
        outcomes.push_back(where + ": NumericError");
        errors.push_back(e.what());
      } catch (const std::exception& e) {
        return {false, fmt::format("after_allreduce with {} threw an error that is not a NumericError: {}; a "
                                   "non-finite gradient the policy does not skip is a NumericError",
                                   where, e.what())};
      }
    }
    if (applied > 0) {
      return {true, fmt::format("{}: allowed without loss scaling (loss_scale() is 1), the trainer stops at its next loss "
                                "check and never checkpoints non-finite weights; an option of the policy that checks "
                                "gradients (fp32, bf16: check_finite = true) is checked here when --set",
                                fmt::join(outcomes, "; "))};
    }
    if (errors.empty()) return {true, fmt::format("{}", fmt::join(outcomes, "; "))};
    return {true, fmt::format("{} (the first: {})", fmt::join(outcomes, "; "), errors.front())};
  }

  Verdict scale() {
    const auto policy = fresh();
    const double before = policy->loss_scale();
    try {
      if (overflow_step(*policy, 300, std::numeric_limits<float>::infinity(), 0, 3) == StepDecision::apply) {
        return {false, fmt::format("a step with +inf in '{}'[3] was applied at loss_scale() {:g}, so the scale was "
                                   "never lowered (see overflow)",
                                   (*params_)[0].name, before)};
      }
    } catch (const NumericError& e) {
      return {true, fmt::format("a fixed loss_scale() {:g}: an overflow stops the run with a NumericError ({})", before,
                                e.what())};
    }
    const double lowered = policy->loss_scale();
    if (!(lowered < before) || !(lowered > 0)) {
      return {false, fmt::format("after a step skipped for +inf in '{}'[3], loss_scale() is {:g} (it was {:g}): a "
                                 "dynamic scale must go down on an overflow, or every later step overflows too",
                                 (*params_)[0].name, lowered, before)};
    }
    // Clean steps until the scale grows, or the step or time budget runs out.
    const auto start = std::chrono::steady_clock::now();
    double now = lowered;
    int steps = 0;
    bool grew = false;
    while (steps < kMaxCleanSteps && !grew) {
      const double scale = policy->loss_scale();
      ++steps;
      if (clean_step(*policy, 400 + static_cast<std::uint64_t>(steps % 8)) != StepDecision::apply) {
        return {false, fmt::format("clean step {} after the overflow (finite gradients at loss_scale() {:g}) was "
                                   "skipped",
                                   steps, scale)};
      }
      now = policy->loss_scale();
      if (!std::isfinite(now) || now < scale) {
        return {false, fmt::format("clean step {} after the overflow changed loss_scale() from {:g} to {:g}: only an "
                                   "overflow may lower it",
                                   steps, scale, now)};
      }
      grew = now > scale;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kCleanStepSeconds) break;
    }
    const std::string first = fmt::format("an overflow lowered loss_scale() from {:g} to {:g}", before, lowered);
    if (grew) {
      return {true, fmt::format("{}; {} clean step{} then raised it to {:g}", first, steps, steps == 1 ? "" : "s", now)};
    }
    return {true, fmt::format("{}; it did not grow within {} clean steps (growth is allowed, not required)", first, steps)};
  }

  /// Runs `count` clean steps on `policy`.
  void clean_steps(PrecisionPolicy& policy, int count, std::uint64_t seed) {
    for (int i = 0; i < count; ++i) (void)clean_step(policy, seed + static_cast<std::uint64_t>(i));
  }

  static std::string nonfinite_entry(const std::map<std::string, double>& m, const char* what) {
    for (const auto& [key, value] : m) {
      if (!std::isfinite(value)) return fmt::format("{}['{}'] is {}", what, key, value);
    }
    return {};
  }

  Verdict state() {
    // A policy that has run: clean steps, an overflow (a policy that stops on one is replaced
    // by a fresh one), and one more clean step.
    std::shared_ptr<PrecisionPolicy> policy = fresh();
    clean_steps(*policy, 2, 500);
    int steps = 2;
    try {
      (void)overflow_step(*policy, 502, std::numeric_limits<float>::infinity(), 2, 4);
      ++steps;
    } catch (const NumericError&) {
      policy = fresh();
      clean_steps(*policy, 2, 500);
    }
    clean_steps(*policy, 1, 503);
    ++steps;
    const std::map<std::string, double> saved = policy->state();
    const float saved_scale = policy->loss_scale();
    const std::map<std::string, double> metrics = policy->metrics();
    for (const auto& [what, m] : {std::pair("state()", saved), std::pair("metrics()", metrics)}) {
      if (const std::string bad = nonfinite_entry(m, what); !bad.empty()) {
        return {false, bad + ": checkpoints and metrics.jsonl hold finite numbers"};
      }
    }
    const auto restored = fresh();
    restored->load_state(saved);
    if (const std::string diff = first_difference(restored->state(), saved); !diff.empty()) {
      return {false, fmt::format("a fresh policy given load_state({}) then reports a state() that {}: load_state must "
                                 "restore what state() saved",
                                 format_map(saved), diff)};
    }
    if (restored->loss_scale() != policy->loss_scale()) {
      return {false, fmt::format("a fresh policy given load_state({}) has loss_scale() {:g}, not {:g} as the policy that "
                                 "saved it: a resumed run would scale the loss differently",
                                 format_map(saved), restored->loss_scale(), policy->loss_scale())};
    }
    // Restored, it must go on as the original does.
    clean_steps(*policy, 1, 504);
    clean_steps(*restored, 1, 504);
    if (const std::string diff = first_difference(restored->state(), policy->state()); !diff.empty()) {
      return {false, fmt::format("after one more clean step on both, the restored policy's state() {} (the original's "
                                 "is {})",
                                 diff, format_map(policy->state()))};
    }
    if (const std::string bad = nonfinite_entry(restored->metrics(), "metrics()"); !bad.empty()) {
      return {false, "after load_state, " + bad};
    }
    if (saved.empty()) {
      return {true, fmt::format("state() is empty after {} steps (nothing to restore); metrics() {} finite", steps,
                                format_map(metrics))};
    }
    return {true, fmt::format("state() {} after {} steps, restored by load_state() into a fresh policy: same state() "
                              "and loss_scale() {:g}, also one step later; metrics() {} finite",
                              format_map(saved), steps, saved_scale, format_map(metrics))};
  }

  std::function<std::shared_ptr<PrecisionPolicy>()> make_;
  Backend& backend_;
  std::shared_ptr<PrecisionPolicy> policy_;  // the one `dtypes` and `backend` ask
  std::vector<CheckLine> lines_;
  DType compute_ = DType::f32;
  std::string refusal_;  // check_backend's message when it refuses the backend
  float initial_scale_ = 1.0f;
  std::unique_ptr<TestParameters> params_;
};

}  // namespace

std::vector<CheckLine> check_precision(const std::function<std::shared_ptr<PrecisionPolicy>()>& make,
                                       Backend& backend) {
  return PrecisionChecks(make, backend).run();
}

}  // namespace kiln::cli
