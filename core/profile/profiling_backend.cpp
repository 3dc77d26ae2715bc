// ProfilingBackend (kiln/profile/profiling_backend.hpp): each op forwards to the inner backend
// inside timed(), with the work it does counted from its operands' shapes.
#include "kiln/profile/profiling_backend.hpp"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace kiln::profile {
namespace {

// The GB/s column counts the bytes an op must move at least: each buffer it reads once and each
// buffer it writes once. Arguments that view the same bytes (same address and size) are one
// buffer within a list: ReLU's backward gets x and y both as the in-place forward's output, and
// counting it twice reported more than the measured copy peak. A buffer that is read AND written
// (in place, Accumulate::yes, optimizer state) is in both lists and counts twice, as it moves twice.
const Tensor kNone;  // an undefined tensor: counts nothing

double distinct_bytes(std::initializer_list<const Tensor*> tensors) {
  double total = 0;
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    const Tensor& t = **it;
    if (!t.defined()) continue;
    const bool seen = std::any_of(tensors.begin(), it, [&](const Tensor* u) {
      return u->defined() && u->data() == t.data() && u->bytes() == t.bytes();
    });
    if (!seen) total += static_cast<double>(t.bytes());
  }
  return total;
}

Work memory(std::initializer_list<const Tensor*> reads, std::initializer_list<const Tensor*> writes) {
  return Work{0, distinct_bytes(reads) + distinct_bytes(writes)};
}

/// The output as a read too when the op adds into it.
const Tensor* read_if(Accumulate acc, const Tensor& out) { return acc == Accumulate::yes ? &out : &kNone; }

/// 2 * outputs * (C/groups * R * S): every output element is one dot product over the filter.
double conv_flops(const Tensor& out_like, const Tensor& filter) {
  const Shape& w = filter.shape();
  return 2.0 * static_cast<double>(out_like.numel()) * static_cast<double>(w[1] * w[2] * w[3]);
}

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The best time of `call` over repeated runs after one untimed run (which may build primitives):
/// at least 5 timed runs and 0.5 s in all, at most 100 runs. A few short runs are not enough on a
/// shared machine: on the Zen 4 EPYC, the best of three 6 ms matmuls read 214 GFLOP/s in one
/// run and 374 in the next, while the convolutions of the same step ran at 420.
template <class Call>
double best_seconds(Call&& call) {
  constexpr int min_runs = 5, max_runs = 100;
  constexpr double min_total = 0.5;
  call();
  double best = std::numeric_limits<double>::infinity(), total = 0;
  for (int i = 0; i < max_runs && (i < min_runs || total < min_total); ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    const double t = seconds_between(start, std::chrono::steady_clock::now());
    best = std::min(best, t);
    total += t;
  }
  return best;
}

}  // namespace

ProfilingBackend::ProfilingBackend(std::shared_ptr<Backend> inner, std::int64_t warmup_steps)
    : inner_(std::move(inner)), warmup_(std::max<std::int64_t>(0, warmup_steps)) {
  profile_.warmup = warmup_;
}

template <class Call>
void ProfilingBackend::timed(std::string_view name, DType dtype, const Work& work, Call&& call) {
  timed(name, dtype_name(dtype), work, std::forward<Call>(call));
}

template <class Call>
void ProfilingBackend::timed(std::string_view name, std::string_view dtype, const Work& work, Call&& call) {
  if (!counting()) {
    call();
    return;
  }
  const auto start = Clock::now();
  call();
  inner_->synchronize();
  const auto end = Clock::now();
  const std::string key = fmt::format("{} {}", name, dtype);
  OpStats& s = profile_.ops[key];
  ++s.calls;
  s.seconds += seconds_between(start, end);
  s.flops += work.flops;
  s.bytes += work.bytes;
  read_memory(&key);
}

void ProfilingBackend::read_memory(const std::string* after_op) {
  const std::map<std::string, double> c = inner_->counters();
  const auto live = c.find("allocator_allocated_mib");
  if (live == c.end()) return;  // a backend without a caching allocator (the cpu one)
  MemoryReadings& m = profile_.memory;
  m.reported = true;
  if (const auto peak = c.find("allocator_peak_mib"); peak != c.end()) m.peak_mib = std::max(m.peak_mib, peak->second);
  if (after_op == nullptr) {
    m.at_step_start_mib = std::max(m.at_step_start_mib, live->second);
  } else if (live->second > m.most_after_op_mib) {
    m.most_after_op_mib = live->second;
    m.most_after_op = *after_op;
  }
}

void ProfilingBackend::measure_peaks(DType dtype) {
  const DType mm = inner_->supports(Op::matmul, dtype) ? dtype : DType::f32;
  // 2048^3 rather than 1024^3: oneDNN's brgemm matmul packs B on every call, which a 1024^3
  // product does not amortise (its rate stayed below what ResNet-50's convolutions reach).
  constexpr std::int64_t n = 2048;
  const Tensor a = inner_->allocate({n, n}, mm, MemoryKind::device);
  const Tensor b = inner_->allocate({n, n}, mm, MemoryKind::device);
  const Tensor c = inner_->allocate({n, n}, mm, MemoryKind::device);
  inner_->fill(a, 0.5);
  inner_->fill(b, 0.25);
  const double matmul_s = best_seconds([&] {
    inner_->matmul(c, a, Transpose::no, b, Transpose::no, 1.0f, 0.0f, Tensor());
    inner_->synchronize();
  });
  profile_.peaks.flops_per_s = 2.0 * n * n * n / matmul_s;
  profile_.peaks.flops_what = fmt::format("matmul {} {}x{}x{}", dtype_name(mm), n, n, n);

  constexpr std::int64_t elems = 16 << 20;  // 64 MiB of f32: well beyond the caches
  const Tensor src = inner_->allocate({elems}, DType::f32, MemoryKind::device);
  const Tensor dst = inner_->allocate({elems}, DType::f32, MemoryKind::device);
  inner_->fill(src, 1.0);
  inner_->fill(dst, 0.0);
  const double copy_s = best_seconds([&] {
    inner_->copy(src, dst);
    inner_->synchronize();
  });
  profile_.peaks.bytes_per_s = 2.0 * static_cast<double>(src.bytes()) / copy_s;
}

void ProfilingBackend::step_begin() {
  ++steps_seen_;
  if (steps_seen_ <= warmup_) return;
  inner_->synchronize();  // work of the previous step is not this step's
  step_thread_.store(std::this_thread::get_id());
  counting_.store(true, std::memory_order_release);
  read_memory(nullptr);
  step_start_ = Clock::now();
}

void ProfilingBackend::step_end() {
  if (!counting_.load(std::memory_order_acquire)) return;
  inner_->synchronize();
  profile_.step_seconds += seconds_between(step_start_, Clock::now());
  ++profile_.steps;
  counting_.store(false, std::memory_order_release);
}

void ProfilingBackend::copy(const Tensor& src, const Tensor& dst) {
  timed("copy", src.dtype(), memory({&src}, {&dst}), [&] { inner_->copy(src, dst); });
}
void ProfilingBackend::fill(const Tensor& t, double value) {
  timed("fill", t.dtype(), memory({}, {&t}), [&] { inner_->fill(t, value); });
}
Tensor ProfilingBackend::to_device(const Tensor& host) {
  // A host backend hands `host` itself back and moves nothing; a device backend reads it and
  // writes the copy. Which one only shows after the call, and timed() adds `w` after the call.
  Tensor out;
  Work w;
  timed("to_device", host.dtype(), w, [&] {
    out = inner_->to_device(host);
    if (out.data() != host.data()) w = memory({&host}, {&out});
  });
  return out;
}

void ProfilingBackend::matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb,
                              float alpha, float beta, const Tensor& bias) {
  const double k = static_cast<double>(ta == Transpose::no ? a.shape().back() : a.shape().front());
  const Tensor& c_read = beta != 0.0f ? c : kNone;  // beta * c reads c as well as writing it
  Work w = memory({&a, &b, &bias, &c_read}, {&c});
  w.flops = 2.0 * static_cast<double>(c.numel()) * k;
  timed("matmul", a.dtype(), w, [&] { inner_->matmul(c, a, ta, b, tb, alpha, beta, bias); });
}
void ProfilingBackend::bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) {
  timed("bias_grad", dy.dtype(), memory({&dy, read_if(acc, db)}, {&db}), [&] { inner_->bias_grad(db, dy, acc); });
}
void ProfilingBackend::activation_forward(const Tensor& y, const Tensor& x, Activation act) {
  timed("activation_forward", x.dtype(), memory({&x}, {&y}), [&] { inner_->activation_forward(y, x, act); });
}
void ProfilingBackend::activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                                           Activation act, Accumulate acc) {
  // The op reads one saved tensor: x for gelu, y = act(x) otherwise (the contract's
  // check_activation_backward, sdk/src/contract/op_args_elementwise.cpp); the other may be undefined.
  const Tensor& saved = act == Activation::gelu ? x : y;
  timed("activation_backward", dy.dtype(), memory({&dy, &saved, read_if(acc, dx)}, {&dx}),
        [&] { inner_->activation_backward(dx, dy, x, y, act, acc); });
}
void ProfilingBackend::add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) {
  timed("add_relu_forward", x.dtype(), memory({&x, &residual}, {&y}),
        [&] { inner_->add_relu_forward(y, x, residual); });
}
void ProfilingBackend::dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                                       std::uint64_t seed) {
  timed("dropout_forward", x.dtype(), memory({&x}, {&y, &mask}),
        [&] { inner_->dropout_forward(y, mask, x, p, seed); });
}
void ProfilingBackend::dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  timed("dropout_backward", dy.dtype(), memory({&dy, &mask}, {&dx}),
        [&] { inner_->dropout_backward(dx, dy, mask, p); });
}
void ProfilingBackend::add(const Tensor& c, const Tensor& a, const Tensor& b) {
  timed("add", a.dtype(), memory({&a, &b}, {&c}), [&] { inner_->add(c, a, b); });
}
void ProfilingBackend::cast(const Tensor& dst, const Tensor& src) {
  // Named by both dtypes: "cast f32->f16" and "cast f16->f32" are different loops.
  const std::string dtypes = fmt::format("{}->{}", dtype_name(src.dtype()), dtype_name(dst.dtype()));
  timed("cast", std::string_view(dtypes), memory({&src}, {&dst}), [&] { inner_->cast(dst, src); });
}
void ProfilingBackend::convert_layout(const Tensor& dst, const Tensor& src) {
  timed("convert_layout", src.dtype(), memory({&src}, {&dst}), [&] { inner_->convert_layout(dst, src); });
}
void ProfilingBackend::scale(const Tensor& t, float factor) {
  timed("scale", t.dtype(), memory({&t}, {&t}), [&] { inner_->scale(t, factor); });
}
void ProfilingBackend::check_finite(const Tensor& flag, const Tensor& t) {
  // flag is written only when t holds an inf or NaN, and is 4 bytes: not counted.
  timed("check_finite", t.dtype(), memory({&t}, {}), [&] { inner_->check_finite(flag, t); });
}
void ProfilingBackend::softmax_xent_forward(const Tensor& probs, const Tensor& stats, const Tensor& logits,
                                            const Tensor& labels, float label_smoothing) {
  // stats is accumulated into: read and written.
  timed("softmax_xent_forward", logits.dtype(), memory({&logits, &labels, &stats}, {&probs, &stats}),
        [&] { inner_->softmax_xent_forward(probs, stats, logits, labels, label_smoothing); });
}
void ProfilingBackend::softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                             float label_smoothing, float scale) {
  timed("softmax_xent_backward", probs.dtype(), memory({&probs, &labels}, {&dlogits}),
        [&] { inner_->softmax_xent_backward(dlogits, probs, labels, label_smoothing, scale); });
}
void ProfilingBackend::top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) {
  timed("top_k_hits", logits.dtype(), memory({&logits, &labels, &count}, {&count}),
        [&] { inner_->top_k_hits(count, logits, labels, k); });
}
void ProfilingBackend::sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                                  const SgdStep& step) {
  // param and momentum (undefined without momentum) are read and written.
  timed("sgd_update", param.dtype(), memory({&param, &momentum, &grad}, {&param, &momentum}),
        [&] { inner_->sgd_update(param, momentum, grad, step); });
}
void ProfilingBackend::adam_update(const Tensor& param, const Tensor& m, const Tensor& v, const Tensor& grad,
                                   const AdamStep& step) {
  // param, m and v are read and written.
  timed("adam_update", param.dtype(), memory({&param, &m, &v, &grad}, {&param, &m, &v}),
        [&] { inner_->adam_update(param, m, v, grad, step); });
}
void ProfilingBackend::lerp(const Tensor& dst, const Tensor& src, float weight) {
  // dst is read and written.
  timed("lerp", dst.dtype(), memory({&dst, &src}, {&dst}), [&] { inner_->lerp(dst, src, weight); });
}
void ProfilingBackend::conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) {
  Work work = memory({&x, &w}, {&y});
  work.flops = conv_flops(y, w);
  timed("conv2d_forward", x.dtype(), work, [&] { inner_->conv2d_forward(plan, y, x, w); });
}
void ProfilingBackend::conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& w) {
  Work work = memory({&dy, &w}, {&dx});
  work.flops = conv_flops(dy, w);
  timed("conv2d_backward_data", dy.dtype(), work, [&] { inner_->conv2d_backward_data(plan, dx, dy, w); });
}
void ProfilingBackend::conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                              Accumulate acc) {
  Work work = memory({&dy, &x, read_if(acc, dw)}, {&dw});
  work.flops = conv_flops(dy, dw);
  timed("conv2d_backward_filter", dy.dtype(), work, [&] { inner_->conv2d_backward_filter(plan, dw, dy, x, acc); });
}
// Batch-norm's per-channel vectors (C floats) are counted like the images, though they hardly
// matter beside them.
void ProfilingBackend::batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean,
                                               const Tensor& save_invstd, const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, const Tensor& running_mean,
                                               const Tensor& running_var) {
  // The running statistics are updated: read and written.
  const Work w = memory({&x, &gamma, &beta, &running_mean, &running_var},
                        {&y, &save_mean, &save_invstd, &running_mean, &running_var});
  timed("batchnorm_train_forward", x.dtype(), w, [&] {
    inner_->batchnorm_train_forward(plan, y, save_mean, save_invstd, x, gamma, beta, running_mean, running_var);
  });
}
void ProfilingBackend::batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, const Tensor& running_mean,
                                               const Tensor& running_var) {
  timed("batchnorm_infer_forward", x.dtype(), memory({&x, &gamma, &beta, &running_mean, &running_var}, {&y}),
        [&] { inner_->batchnorm_infer_forward(plan, y, x, gamma, beta, running_mean, running_var); });
}
void ProfilingBackend::batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                                          const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                          const Tensor& save_mean, const Tensor& save_invstd) {
  // dgamma and dbeta are parameter gradients, accumulated into (ops.hpp): read and written.
  const Work w = memory({&dy, &x, &gamma, &save_mean, &save_invstd, &dgamma, &dbeta}, {&dx, &dgamma, &dbeta});
  timed("batchnorm_backward", dy.dtype(), w, [&] {
    inner_->batchnorm_backward(plan, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd);
  });
}
void ProfilingBackend::batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) {
  timed("batchnorm_stats", x.dtype(), memory({&x}, {&mean, &var}),
        [&] { inner_->batchnorm_stats(plan, mean, var, x); });
}
void ProfilingBackend::batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat,
                                                 const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                                                 const Tensor& save_invstd) {
  timed("batchnorm_backward_reduce", dy.dtype(), memory({&dy, &x, &save_mean, &save_invstd}, {&sum_dy, &sum_dy_xhat}),
        [&] { inner_->batchnorm_backward_reduce(plan, sum_dy, sum_dy_xhat, dy, x, save_mean, save_invstd); });
}
void ProfilingBackend::batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                                const Tensor& gamma, const Tensor& save_mean,
                                                const Tensor& save_invstd, const Tensor& sum_dy,
                                                const Tensor& sum_dy_xhat, std::int64_t count) {
  const Work w = memory({&dy, &x, &gamma, &save_mean, &save_invstd, &sum_dy, &sum_dy_xhat}, {&dx});
  timed("batchnorm_backward_elemt", dy.dtype(), w, [&] {
    inner_->batchnorm_backward_elemt(plan, dx, dy, x, gamma, save_mean, save_invstd, sum_dy, sum_dy_xhat, count);
  });
}
void ProfilingBackend::pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) {
  timed("pool2d_forward", x.dtype(), memory({&x}, {&y}), [&] { inner_->pool2d_forward(plan, y, x); });
}
void ProfilingBackend::pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                       const Tensor& y) {
  // Only dy is read by every backend: the cpu backend's max pooling routes through the argmax its
  // forward saved in the plan, average pooling reads neither x nor y (cuDNN's max pooling reads
  // both, which this lower bound leaves out).
  timed("pool2d_backward", dy.dtype(), memory({&dy}, {&dx}), [&] { inner_->pool2d_backward(plan, dx, dy, x, y); });
}
void ProfilingBackend::global_avgpool_forward(const Tensor& y, const Tensor& x) {
  timed("global_avgpool_forward", x.dtype(), memory({&x}, {&y}), [&] { inner_->global_avgpool_forward(y, x); });
}
void ProfilingBackend::global_avgpool_backward(const Tensor& dx, const Tensor& dy) {
  timed("global_avgpool_backward", dy.dtype(), memory({&dy}, {&dx}),
        [&] { inner_->global_avgpool_backward(dx, dy); });
}
void ProfilingBackend::normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) {
  timed("normalize_image", dst.dtype(), memory({&src}, {&dst}), [&] { inner_->normalize_image(dst, src, norm); });
}

}  // namespace kiln::profile
