// Conformance cases of the loss and the optimizers, which layers run in f32 only (the loss reads
// f32 logits; updates are over the f32 master arena): softmax cross-entropy forward (probs, the
// accumulated [loss sum, correct count] stats) and backward, with and without label smoothing;
// top-k hits over logits full of ties and one NaN, for k = 1 (argmax), 3, 5 and K;
// SGD (plain, momentum with dampening, Nesterov, weight decay) and Adam/AdamW at steps 1 and 7;
// lerp ([ema]'s moving average of the f32 weights) on both sides of weight 0.5, exact at 0 and 1,
// in place, and refusing bad arguments by name.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "reference.hpp"

namespace kiln::conformance {
namespace {

/// after - before: parameters are judged by their update, which is small next to the parameter
/// itself (an Adam step is ~lr), so a wrong update cannot hide under the parameter's norm.
std::vector<double> delta(std::vector<double> after, const std::vector<double>& before) {
  for (std::size_t i = 0; i < after.size(); ++i) after[i] -= before[i];
  return after;
}

/// Logits whose rows have one clear maximum (argmax ties would make "correct" ambiguous).
std::vector<double> logits_without_ties(Rng& rng, std::int64_t b, std::int64_t k) {
  std::vector<double> out;
  for (std::int64_t i = 0; i < b; ++i) {
    std::vector<double> row;
    do {
      row = uniform(rng, static_cast<std::size_t>(k), -4, 4, DType::f32);
      std::vector<double> sorted = row;
      std::sort(sorted.rbegin(), sorted.rend());
      if (sorted[0] - sorted[1] > 1e-3) break;
    } while (true);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

void softmax_xent_case(const Variant& /*f32*/) {
  const std::int64_t b = 12, k = 10;
  Rng rng(11);
  const auto logits = logits_without_ties(rng, b, k);
  auto labels = integers(rng, static_cast<std::size_t>(b), k);
  for (std::int64_t i = 0; i < b; i += 2) {  // half the rows correct, so the count is tested
    const auto row = logits.begin() + i * k;
    labels[static_cast<std::size_t>(i)] = static_cast<double>(std::max_element(row, row + k) - row);
  }
  const Tensor logits_t = upload(logits, {b, k}, DType::f32);
  const Tensor labels_t = to_device(labels, {b}, DType::i32);
  for (const double smoothing : {0.0, 0.1}) {
    const std::string s = " (smoothing " + std::to_string(smoothing) + ")";
    const auto want = ref::softmax_xent_forward(b, k, logits, labels, smoothing);
    const Tensor probs = poisoned({b, k}, DType::f32);
    const std::vector<double> stats0{3.25, 2.0};  // accumulated into, not overwritten
    const Tensor stats = upload(stats0, {2}, DType::f32);
    backend().softmax_xent_forward(probs, stats, logits_t, labels_t, static_cast<float>(smoothing));
    const auto probs_got = fetch(probs);
    expect_close(probs_got, want.probs, tolerance(DType::f32), "probs" + s);
    const auto stats_got = fetch(stats);
    expect_close({stats_got[0]}, {stats0[0] + want.loss_sum}, tolerance(DType::f32), "stats[0] loss sum" + s);
    expect_equal({stats_got[1]}, {stats0[1] + want.correct}, "stats[1] correct count" + s);

    const Tensor dlogits = poisoned({b, k}, DType::f32);
    backend().softmax_xent_backward(dlogits, upload(want.probs, {b, k}, DType::f32), labels_t,
                                    static_cast<float>(smoothing), 0.125f);
    expect_close(fetch(dlogits), ref::softmax_xent_backward(b, k, want.probs, labels, smoothing, 0.125),
                 tolerance(DType::f32), "dlogits" + s);
  }
}

void top_k_hits_case(const Variant& /*f32*/) {
  const std::int64_t b = 24, k = 10;
  Rng rng(13);
  // Whole numbers in [0, 4): most rows hold ties, including at the label, so the tie rule (a
  // lower class index ranks higher) decides many counts.
  std::vector<double> logits = integers(rng, static_cast<std::size_t>(b * k), 4);
  const auto labels = integers(rng, static_cast<std::size_t>(b), k);
  logits[static_cast<std::size_t>(5 * k + static_cast<std::int64_t>(labels[5]))] = std::nan("");
  const Tensor logits_t = upload(logits, {b, k}, DType::f32);
  const Tensor labels_t = to_device(labels, {b}, DType::i32);
  for (const std::int64_t top : {std::int64_t{1}, std::int64_t{3}, std::int64_t{5}, k}) {
    const double count0 = 7.0;  // accumulated into, not overwritten
    const Tensor count = upload({count0}, {1}, DType::f32);
    backend().top_k_hits(count, logits_t, labels_t, top);
    expect_equal(fetch(count), {count0 + ref::top_k_hits(b, k, logits, labels, top)},
                 "count for k = " + std::to_string(top));
  }
}

void sgd_case(const Variant& /*f32*/) {
  const std::int64_t n = 517;
  Rng rng(12);
  struct Config {
    const char* name;
    SgdStep step;
  };
  const Config configs[] = {
      {"plain", {0.1f, 0.0f, 0.0f, 0.0f, SgdStep::Nesterov::no}},
      {"momentum+dampening+decay", {0.05f, 0.9f, 0.1f, 1e-2f, SgdStep::Nesterov::no}},
      {"nesterov+decay", {0.05f, 0.9f, 0.0f, 5e-3f, SgdStep::Nesterov::yes}},
  };
  for (const Config& c : configs) {
    auto param = uniform(rng, n, -1, 1, DType::f32);
    const auto param0 = param;
    auto momentum = uniform(rng, n, -1, 1, DType::f32);
    const auto grad = uniform(rng, n, -1, 1, DType::f32);
    const Tensor p_t = upload(param, {n}, DType::f32);
    const Tensor g_t = upload(grad, {n}, DType::f32);
    const bool has_momentum = c.step.momentum != 0.0f;
    const Tensor m_t = has_momentum ? upload(momentum, {n}, DType::f32) : Tensor();
    backend().sgd_update(p_t, m_t, g_t, c.step);
    ref::sgd(param, momentum, grad, c.step);
    expect_close(delta(fetch(p_t), param0), delta(param, param0), tolerance(DType::f32),
                 std::string("param update ") + c.name);
    if (has_momentum) expect_close(fetch(m_t), momentum, tolerance(DType::f32), std::string("momentum ") + c.name);
  }
}

void adam_case(const Variant& /*f32*/) {
  const std::int64_t n = 611;
  Rng rng(13);
  for (const auto decay : {AdamStep::Decay::coupled, AdamStep::Decay::decoupled}) {
    for (const std::int64_t t : {std::int64_t{1}, std::int64_t{7}}) {
      AdamStep step;
      step.lr = 0.05f;  // updates ~0.05: far above the f32 rounding of the parameter
      step.weight_decay = 0.05f;
      step.step = t;
      step.decay = decay;
      auto param = uniform(rng, n, -1, 1, DType::f32);
      const auto param0 = param;
      auto m = uniform(rng, n, -0.1, 0.1, DType::f32);
      auto v = uniform(rng, n, 1e-4, 1e-2, DType::f32);
      const auto grad = uniform(rng, n, -1, 1, DType::f32);
      const Tensor p_t = upload(param, {n}, DType::f32), m_t = upload(m, {n}, DType::f32);
      const Tensor v_t = upload(v, {n}, DType::f32), g_t = upload(grad, {n}, DType::f32);
      backend().adam_update(p_t, m_t, v_t, g_t, step);
      ref::adam(param, m, v, grad, step);
      const std::string what = std::string(decay == AdamStep::Decay::coupled ? "adam" : "adamw") +
                               " step " + std::to_string(t);
      expect_close(delta(fetch(p_t), param0), delta(param, param0), tolerance(DType::f32), "param update " + what);
      expect_close(fetch(m_t), m, tolerance(DType::f32), "m " + what);
      expect_close(fetch(v_t), v, tolerance(DType::f32), "v " + what);
    }
  }
}

/// What lerp must give for the element (dst, src) at `weight` when it gave `got`: torch.lerp's
/// side of 0.5 in f32 (kiln/backend.hpp), each operation rounded (plain) or the multiply-add fused
/// into one rounding, as the contract allows; whichever of the two `got` is, else the plain one,
/// so a wrong element shows against it.
double lerp_f32(double got, double dst, double src, float weight) {
  const float d = static_cast<float>(dst), s = static_cast<float>(src), diff = s - d;
  // volatile: the product is rounded on its own even where the host compiler would contract
  // the plain formula into an fma (-ffp-contract=fast with FMA in -march).
  volatile float part = weight < 0.5f ? weight * diff : diff * (1.0f - weight);
  const float plain = weight < 0.5f ? d + part : s - part;
  const float fused = weight < 0.5f ? std::fma(weight, diff, d) : std::fma(-diff, 1.0f - weight, s);
  return got == double{fused} ? double{fused} : double{plain};
}

void lerp_case(const Variant& /*f32*/) {
  const std::int64_t n = 1031;  // odd: a vectorised backend's tail too
  Rng rng(14);
  const auto dst0 = uniform(rng, static_cast<std::size_t>(n), -3, 3, DType::f32);
  const auto src = uniform(rng, static_cast<std::size_t>(n), -3, 3, DType::f32);
  const Tensor src_t = upload(src, {n}, DType::f32);
  // 1e-4 is [ema]'s usual 1 - decay (dst side, like 0.25); 0.5 and 0.75 take the src side.
  const std::pair<float, const char*> weights[] = {{1e-4f, "1e-4"}, {0.25f, "0.25"}, {0.5f, "0.5"}, {0.75f, "0.75"}};
  for (const auto& [weight, label] : weights) {
    const Tensor dst = upload(dst0, {n}, DType::f32);
    backend().lerp(dst, src_t, weight);
    const std::vector<double> got = fetch(dst);
    std::vector<double> want(got.size());
    for (std::size_t i = 0; i < got.size(); ++i) want[i] = lerp_f32(got[i], dst0[i], src[i], weight);
    expect_equal(got, want, std::string("dst at weight ") + label + " (torch.lerp's f32 formula)");
  }
  // The ends, bit for bit: an average that never moves at 0 and is a copy at 1.
  const Tensor still = upload(dst0, {n}, DType::f32);
  backend().lerp(still, src_t, 0.0f);
  expect_equal(fetch(still), dst0, "weight 0 leaves dst");
  const Tensor copied = upload(dst0, {n}, DType::f32);
  backend().lerp(copied, src_t, 1.0f);
  expect_equal(fetch(copied), src, "weight 1 gives src");
  const Tensor same = upload(dst0, {n}, DType::f32);
  backend().lerp(same, same, 0.75f);
  expect_equal(fetch(same), dst0, "src = dst leaves dst");

  // Refusals by the shared check (sdk::check_lerp), before anything is written.
  const Tensor dst = upload(dst0, {n}, DType::f32);
  const Tensor shorter = upload(std::vector<double>(src.begin(), src.end() - 1), {n - 1}, DType::f32);
  expect_refused([&] { backend().lerp(dst, shorter, 0.5f); }, Op::lerp, "src", "src of another shape");
  const auto halves = uniform(rng, static_cast<std::size_t>(n), -3, 3, DType::bf16);
  const Tensor dst16 = upload(halves, {n}, DType::bf16), src16 = upload(halves, {n}, DType::bf16);
  expect_refused([&] { backend().lerp(dst16, src16, 0.5f); }, Op::lerp, "f32", "bf16 operands");
  // A plain variable, not a structured binding: clang before 16 cannot capture one in a lambda.
  for (const std::pair<float, const char*>& bad : {std::pair<float, const char*>{-0.1f, "-0.1"}, {1.5f, "1.5"},
                                                   {std::nanf(""), "NaN"}}) {
    const float weight = bad.first;
    expect_refused([&] { backend().lerp(dst, src_t, weight); }, Op::lerp, "weight", std::string("weight ") + bad.second);
  }
  expect_equal(fetch(dst), dst0, "dst after the refused calls");
}

}  // namespace

void add_loss_optim_cases(CaseList& cases) {
  cases.add("softmax_xent", {Op::softmax_xent_forward, Op::softmax_xent_backward}, Axes::f32_only, softmax_xent_case);
  cases.add("top_k_hits", {Op::top_k_hits}, Axes::f32_only, top_k_hits_case);
  cases.add("sgd_update", {Op::sgd_update}, Axes::f32_only, sgd_case);
  cases.add("adam_update", {Op::adam_update}, Axes::f32_only, adam_case);
  cases.add("lerp", {Op::lerp}, Axes::f32_only, lerp_case);
}

}  // namespace kiln::conformance
