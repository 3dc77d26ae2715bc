// The model checks of `kiln plugins test` (see conformance.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "conformance.hpp"
#include "kiln/errors.hpp"
#include "kiln/rng.hpp"
#include "kiln/sdk/half.hpp"

namespace kiln::cli {
namespace {

constexpr std::int64_t kMaxBatch = 4;  // what build() sizes for
constexpr std::int64_t kBatch = 3;     // what forward() gets: a partial batch
constexpr std::uint64_t kStepSeed = 11;
constexpr int kCheckedParameters = 4;
// Central differences in f32 arithmetic on d(sum(logits * R))/dw, at three step sizes relative
// to the weight, the closest kept: a large step suffers from ReLU kinks and max-pooling switches
// crossed (ResNet-18's stem: 18% off at 1e-3, 2.7% at 1e-4), a small one from rounding. A correct
// backward agrees at one of them; a wrong sign, a missing factor or a missing term at none.
constexpr double kRelativeSteps[] = {1e-3, 1e-4, 1e-5};
constexpr double kGradientTolerance = 5e-2;

std::vector<double> read_back(Backend& backend, const Tensor& t) {
  Tensor host = host_tensor(t.shape(), t.dtype());
  backend.copy(t, host);
  backend.synchronize();
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype()) {
      case DType::f32: out[i] = host.data_as<float>()[i]; break;
      case DType::f16: out[i] = sdk::f16_to_f32(host.data_as<std::uint16_t>()[i]); break;
      case DType::bf16: out[i] = sdk::bf16_to_f32(host.data_as<std::uint16_t>()[i]); break;
      default: throw UnsupportedError(fmt::format("reading back a {} tensor", dtype_name(t.dtype())));
    }
  }
  return out;
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

/// One f32 element of a parameter, written through the backend (and into its compute copy when
/// that is not the master itself).
void write_element(Backend& backend, const Parameter& p, std::int64_t index, float value) {
  Tensor one = host_tensor({1}, DType::f32);
  *one.data_as<float>() = value;
  const auto at = [&](const Tensor& t) {
    return Tensor(t.storage(), {1}, t.dtype(), t.offset_bytes() + static_cast<std::size_t>(index) * dtype_size(t.dtype()));
  };
  backend.copy(one, at(p.value));
  const bool aliased = p.compute.storage() == p.value.storage() && p.compute.offset_bytes() == p.value.offset_bytes();
  if (!aliased) backend.cast(at(p.compute), at(p.value));
  backend.synchronize();
}

/// Zeroes the gradients of `model`, runs one forward(train) and backward(dlogits), and returns
/// each parameter's report count. Throws for an index past the parameters.
std::vector<int> forward_backward(Model& model, Backend& backend, const Tensor& input, const Tensor& dlogits,
                                  bool zero) {
  const auto params = model.parameters();
  if (zero) {
    for (const Parameter& p : params) backend.fill(p.grad, 0.0);
  }
  (void)model.forward(input, Mode::train, kStepSeed);
  std::vector<int> reported(params.size(), 0);
  std::size_t out_of_range = 0;
  model.backward(dlogits, [&](std::size_t i) {
    if (i < reported.size()) {
      ++reported[i];
    } else {
      ++out_of_range;
    }
  });
  backend.synchronize();
  if (out_of_range > 0) {
    throw Error(fmt::format("backward() reported {} index(es) past the {} parameters", out_of_range, params.size()));
  }
  return reported;
}

/// How far apart two gradients may be, relative to the largest entry of the expected one: a
/// kernel may sum in another order on another path (ResNet-50's 1x1 backward-filter adding into
/// its output against writing it: 2e-5 of an entry apart).
constexpr double kSummationTolerance = 1e-3;

double largest_magnitude(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

/// The first index where `got` and `want` are more than `tolerance` apart, if any.
std::optional<std::size_t> first_mismatch(const std::vector<double>& got, const std::vector<double>& want,
                                          double tolerance) {
  for (std::size_t k = 0; k < got.size() && k < want.size(); ++k) {
    if (std::abs(got[k] - want[k]) > tolerance) return k;
  }
  return std::nullopt;
}

class ModelChecks {
 public:
  ModelChecks(const std::function<std::shared_ptr<Model>()>& make_model, Backend& backend)
      : make_model_(make_model), owned_(make_model()), model_(*owned_), backend_(backend) {}

  std::vector<CheckLine> run() {
    const InputSpec spec = model_.input_spec();
    if (!step("build", [&] { return build(spec); })) return lines_;
    if (!step("parameters", [&] { return parameters(); })) return lines_;
    if (!step("forward", [&] { return forward(); })) return lines_;
    if (!step("backward", [&] { return backward(); })) return lines_;
    step("accumulate", [&] { return accumulate(); });
    step("gradient", [&] { return gradient(); });
    step("frozen", [&] { return frozen(); });
    step("frozen_bn", [&] { return frozen_bn(); });
    return lines_;
  }

 private:
  /// Runs one check and records its line; returns whether it passed.
  template <class Check>
  bool step(const char* name, Check&& check) {
    lines_.push_back(run_check(name, std::forward<Check>(check)));
    return lines_.back().ok;
  }

  ModelBuildContext build_context() {
    ModelBuildContext ctx;
    ctx.backend = &backend_;
    ctx.max_batch = kMaxBatch;
    ctx.seed = 1;  // every model built here starts from the same values
    return ctx;
  }

  Verdict build(const InputSpec& spec) {
    model_.build(build_context());
    SampleRng rng(0x6b696c6e);  // a fixed stream: the same verdict on every run
    Shape shape{kBatch};
    for (std::int64_t d : spec.sample_shape) shape.push_back(d);
    Tensor x = host_tensor(shape, spec.dtype);
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      if (spec.dtype == DType::f32) {
        x.data_as<float>()[i] = rng.uniform(-1.0f, 1.0f);
      } else if (spec.dtype == DType::u8) {
        x.data_as<std::uint8_t>()[i] = static_cast<std::uint8_t>(rng.below(256));
      } else {
        return {false, fmt::format("input_spec() asks for {} samples; these checks feed f32 or u8",
                                   dtype_name(spec.dtype))};
      }
    }
    input_host_ = x;
    input_ = backend_.to_device(input_host_);
    classes_ = spec.num_classes;
    Tensor r = host_tensor({kBatch, classes_}, DType::f32);
    for (std::int64_t i = 0; i < r.numel(); ++i) {
      r.data_as<float>()[i] = rng.uniform(-1.0f, 1.0f);
      r_.push_back(r.data_as<float>()[i]);
    }
    dlogits_host_ = r;
    dlogits_ = backend_.to_device(dlogits_host_);
    return {true, fmt::format("built for batches of up to {} on {}; input {}{}, {} classes", kMaxBatch,
                              backend_.device().name, dtype_name(spec.dtype), shape_string(spec.sample_shape),
                              classes_)};
  }

  Verdict parameters() {
    const auto params = model_.parameters();
    if (params.empty()) return {false, "parameters() is empty: nothing would train"};
    std::set<std::string> names;
    std::int64_t values = 0;
    for (const Parameter& p : params) {
      if (p.name.empty()) return {false, "a parameter has an empty name"};
      if (!names.insert(p.name).second) return {false, fmt::format("two parameters are named '{}'", p.name)};
      if (p.grad.shape() != p.value.shape()) {
        return {false, fmt::format("'{}' has value {} but gradient {}", p.name, shape_string(p.value.shape()),
                                   shape_string(p.grad.shape()))};
      }
      if (p.value.dtype() != DType::f32 || p.grad.dtype() != DType::f32) {
        return {false, fmt::format("'{}' is {} with a {} gradient; masters and gradients are f32 here", p.name,
                                   dtype_name(p.value.dtype()), dtype_name(p.grad.dtype()))};
      }
      values += p.value.numel();
    }
    return {true, fmt::format("{} tensors, {} values, unique names", params.size(), values)};
  }

  std::vector<double> logits(Mode mode) {
    const Tensor y = model_.forward(input_, mode, kStepSeed);
    if (y.shape() != Shape{kBatch, classes_}) {
      throw Error(fmt::format("forward() of a batch of {} returned {}, not ({}, {})", kBatch, shape_string(y.shape()),
                              kBatch, classes_));
    }
    return read_back(backend_, y);
  }

  Verdict forward() {
    const std::vector<double> train = logits(Mode::train);
    if (!all_finite(train)) return {false, "train-mode logits are not all finite"};
    const std::vector<double> a = logits(Mode::eval), b = logits(Mode::eval);
    if (!all_finite(a)) return {false, "eval-mode logits are not all finite"};
    if (a != b) return {false, "eval mode gave different logits for the same input twice"};
    return {true, fmt::format("logits ({}, {}) finite in train and eval mode; eval repeatable bit for bit", kBatch,
                              classes_)};
  }

  /// Zeroes the gradients, then one forward(train) and backward(R); returns each parameter's
  /// report count.
  std::vector<int> forward_backward(bool zero) { return kiln::cli::forward_backward(model_, backend_, input_, dlogits_, zero); }

  std::vector<std::vector<double>> gradients() {
    std::vector<std::vector<double>> g;
    for (const Parameter& p : model_.parameters()) g.push_back(read_back(backend_, p.grad));
    return g;
  }

  Verdict backward() {
    const auto reported = forward_backward(true);
    const auto params = model_.parameters();
    std::vector<std::string> missing, twice;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (reported[i] == 0) missing.push_back(params[i].name);
      if (reported[i] > 1) twice.push_back(params[i].name);
    }
    if (!missing.empty()) {
      return {false, fmt::format("never reported as ready: {} (GradSync would reduce them only at the end)",
                                 fmt::join(missing, ", "))};
    }
    if (!twice.empty()) return {false, fmt::format("reported more than once: {}", fmt::join(twice, ", "))};
    first_ = gradients();
    bool any = false;
    for (std::size_t i = 0; i < first_.size(); ++i) {
      if (!all_finite(first_[i])) return {false, fmt::format("'{}' has a non-finite gradient", params[i].name)};
      any = any || std::any_of(first_[i].begin(), first_[i].end(), [](double v) { return v != 0; });
    }
    if (!any) return {false, "every gradient is zero"};
    return {true, fmt::format("each of the {} parameters reported once; gradients finite", params.size())};
  }

  Verdict accumulate() {
    (void)forward_backward(false);
    const auto second = gradients();
    const auto params = model_.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      // Overwriting instead of adding is off by half.
      std::vector<double> twice = first_[i];
      for (double& g : twice) g *= 2;
      if (const auto k = first_mismatch(second[i], twice, kSummationTolerance * largest_magnitude(first_[i]))) {
        return {false, fmt::format("after two backward passes '{}'[{}] is {:.7g}, not twice {:.7g}: backward must "
                                   "add into the gradients (+=), not overwrite them",
                                   params[i].name, *k, second[i][*k], first_[i][*k])};
      }
    }
    return {true, "a second backward added into every gradient (accumulation works)"};
  }

  double objective() {
    const std::vector<double> y = logits(Mode::train);
    double sum = 0;
    for (std::size_t i = 0; i < y.size(); ++i) sum += y[i] * r_[i];
    return sum;
  }

  Verdict gradient() {
    const auto params = model_.parameters();
    // First, last and two in between: the head, the input layer and something in the middle.
    std::set<std::size_t> chosen;
    for (int k = 0; k < kCheckedParameters; ++k) {
      chosen.insert(static_cast<std::size_t>(k) * (params.size() - 1) / (kCheckedParameters - 1));
    }
    double worst = 0;
    std::string worst_at;
    int compared = 0;
    for (std::size_t i : chosen) {
      const std::vector<double>& g = first_[i];
      const auto largest = std::max_element(g.begin(), g.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
      if (largest == g.end() || *largest == 0) continue;
      const auto index = static_cast<std::int64_t>(largest - g.begin());
      const float w0 = static_cast<float>(read_back(backend_, params[i].value)[static_cast<std::size_t>(index)]);
      double error = 2, numeric = 0;
      for (double relative : kRelativeSteps) {
        const double h = relative * std::max(1.0, static_cast<double>(std::abs(w0)));
        const float up = static_cast<float>(w0 + h), down = static_cast<float>(w0 - h);
        write_element(backend_, params[i], index, up);
        const double above = objective();
        write_element(backend_, params[i], index, down);
        const double below = objective();
        write_element(backend_, params[i], index, w0);
        const double estimate = (above - below) / (static_cast<double>(up) - static_cast<double>(down));
        const double apart = std::abs(estimate - *largest) / std::max(std::abs(*largest), std::abs(estimate));
        if (apart < error) {
          error = apart;
          numeric = estimate;
        }
      }
      ++compared;
      if (error > worst) {
        worst = error;
        worst_at = fmt::format("'{}'[{}]: backward {:.6g}, central difference {:.6g}", params[i].name, index, *largest,
                               numeric);
      }
    }
    if (compared == 0) return {false, "no checked parameter has a non-zero gradient"};
    if (worst > kGradientTolerance) {
      return {false, fmt::format("backward disagrees with the forward pass: {} ({:.1f}% apart)", worst_at, 100 * worst)};
    }
    return {true, fmt::format("{} entries agree with central differences (at most {:.2f}% apart)", compared,
                              100 * worst)};
  }

  /// One fresh model built with ModelBuildContext::frozen naming the parameters `frozen` marks,
  /// run as backward() ran the first; returns what is wrong ("" when nothing is). Sets `honoured`
  /// to whether the model marked what it was told.
  std::string frozen_case(const std::vector<bool>& frozen, bool& honoured) {
    const auto reference = model_.parameters();
    std::set<std::string> names;
    for (std::size_t i = 0; i < reference.size(); ++i) {
      if (frozen[i]) names.insert(reference[i].name);
    }
    const std::shared_ptr<Model> model = make_model_();
    ModelBuildContext ctx = build_context();
    ctx.frozen = [&names](std::string_view name) { return names.count(std::string(name)) > 0; };
    model->build(ctx);
    const auto params = model->parameters();
    if (params.size() != reference.size()) {
      return fmt::format("built with frozen parameters it has {} parameters, not {}", params.size(), reference.size());
    }
    std::size_t marked = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].name != reference[i].name) {
        return fmt::format("parameter {} is '{}' built with frozen parameters but '{}' without", i, params[i].name,
                           reference[i].name);
      }
      const bool flag = (params[i].flags & kParamFrozen) != 0;
      if (flag && !frozen[i]) {
        return fmt::format("'{}' is marked kParamFrozen but trains; mark only what ModelBuildContext::frozen names",
                           params[i].name);
      }
      if (flag) ++marked;
    }
    const std::size_t told = names.size();
    if (marked != 0 && marked != told) {
      return fmt::format("{} of the {} frozen parameters are marked kParamFrozen; mark all or none", marked, told);
    }
    honoured = marked == told;
    const std::vector<int> reported = kiln::cli::forward_backward(*model, backend_, input_, dlogits_, true);
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (frozen[i]) {
        if (reported[i] > 1) return fmt::format("frozen '{}' reported {} times", params[i].name, reported[i]);
        continue;
      }
      if (reported[i] != 1) {
        return fmt::format("trainable '{}' reported {} times, not once", params[i].name, reported[i]);
      }
      const std::vector<double> got = read_back(backend_, params[i].grad);
      if (const auto k = first_mismatch(got, first_[i], kSummationTolerance * largest_magnitude(first_[i]))) {
        return fmt::format("trainable '{}'[{}] is {:.7g}, not {:.7g} (its gradient without frozen parameters): "
                           "frozen parameters must not change a trainable one's gradient",
                           params[i].name, *k, got[*k], first_[i][*k]);
      }
    }
    return {};
  }

  Verdict frozen() {
    const std::size_t n = model_.parameters().size();
    if (n < 2) return {true, "one parameter: nothing to freeze while something trains"};
    // A probe (only the last parameter trains), a frozen input half, and frozen layers between
    // trainable ones, where gradients must still flow through what is frozen.
    const std::pair<const char*, std::function<bool(std::size_t)>> cases[] = {
        {"all but the last", [&](std::size_t i) { return i + 1 < n; }},
        {"the first half", [&](std::size_t i) { return i < n / 2; }},
        {"every other one", [&](std::size_t i) { return i % 2 == 0; }},
    };
    bool honoured_all = true;
    for (const auto& [what, rule] : cases) {
      std::vector<bool> frozen(n);
      for (std::size_t i = 0; i < n; ++i) frozen[i] = rule(i);
      bool honoured = false;
      const std::string wrong = frozen_case(frozen, honoured);
      if (!wrong.empty()) return {false, fmt::format("with {} frozen: {}", what, wrong)};
      honoured_all = honoured_all && honoured;
    }
    return {true, honoured_all ? "all but the last, the first half and every other parameter frozen in turn: "
                                 "trainable gradients unchanged; the model marks and skips the frozen ones"
                               : "all but the last, the first half and every other parameter frozen in turn: "
                                 "trainable gradients unchanged; the model ignores ModelBuildContext::frozen "
                                 "(allowed, but frozen layers cost their full backward)"};
  }

  /// [model] frozen_bn = "eval" (ModelBuildContext::frozen_bn): with all but the last parameter
  /// frozen, every buffer the model marks kBufferFrozen must come out of two training steps bit
  /// for bit as it went in (the core trusts the mark: it stops synchronising nothing, but it tells
  /// the user those statistics are kept). Under Mode::train no buffer may be marked.
  Verdict frozen_bn() {
    for (const ModelBuffer& b : model_.buffers()) {
      if ((b.flags & kBufferFrozen) != 0) {
        return {false, fmt::format("'{}' is marked kBufferFrozen although ModelBuildContext::frozen_bn is train; "
                                   "mark only the statistics a Mode::eval build keeps",
                                   b.name)};
      }
    }
    const auto reference = model_.parameters();
    std::set<std::string> names;
    for (std::size_t i = 0; i + 1 < reference.size(); ++i) names.insert(reference[i].name);
    const std::shared_ptr<Model> model = make_model_();
    ModelBuildContext ctx = build_context();
    ctx.frozen = [&names](std::string_view name) { return names.count(std::string(name)) > 0; };
    ctx.frozen_bn = Mode::eval;
    model->build(ctx);
    const auto buffers = model->buffers();
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if ((buffers[i].flags & kBufferFrozen) != 0) kept.push_back(i);
    }
    if (kept.empty()) {
      return {true, fmt::format("no buffer kept with all but the last parameter frozen under frozen_bn = \"eval\" "
                                "({} buffers); the core refuses that setting for this model",
                                buffers.size())};
    }
    std::vector<std::vector<double>> before;
    for (std::size_t i : kept) before.push_back(read_back(backend_, buffers[i].value));
    for (int step = 0; step < 2; ++step) (void)kiln::cli::forward_backward(*model, backend_, input_, dlogits_, true);
    for (std::size_t k = 0; k < kept.size(); ++k) {
      const std::vector<double> after = read_back(backend_, buffers[kept[k]].value);
      // != rather than first_mismatch(): a NaN written into the buffer must count as a change.
      const auto changed = [&](std::size_t i) { return after[i] != before[k][i]; };
      std::size_t i = 0;
      while (i < after.size() && !changed(i)) ++i;
      if (i < after.size()) {
        return {false, fmt::format("'{}'[{}] is marked kBufferFrozen but two training steps changed it from {:.7g} to "
                                   "{:.7g}: a kept running statistic must not be written",
                                   buffers[kept[k]].name, i, before[k][i], after[i])};
      }
    }
    const auto trained = read_back(backend_, model->parameters().back().grad);
    if (!all_finite(trained)) return {false, "under frozen_bn = \"eval\" the trainable parameter's gradient is not finite"};
    return {true, fmt::format("{} of {} buffers kept with all but the last parameter frozen under frozen_bn = \"eval\": "
                              "unchanged bit for bit by two training steps",
                              kept.size(), buffers.size())};
  }

  std::function<std::shared_ptr<Model>()> make_model_;
  std::shared_ptr<Model> owned_;
  Model& model_;
  Backend& backend_;
  std::vector<CheckLine> lines_;
  Tensor input_host_, input_, dlogits_host_, dlogits_;
  std::vector<double> r_;
  std::int64_t classes_ = 0;
  std::vector<std::vector<double>> first_;  // gradients of one backward, from zero
};

}  // namespace

std::vector<CheckLine> check_model(const std::function<std::shared_ptr<Model>()>& make_model, Backend& backend) {
  return ModelChecks(make_model, backend).run();
}

}  // namespace kiln::cli
