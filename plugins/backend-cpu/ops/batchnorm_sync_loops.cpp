// Plain loops for the synchronised batch-norm ops (batchnorm_stats, batchnorm_backward_reduce,
// batchnorm_backward_elemt; backend.hpp), in f32, bf16 or f16, NCHW or channels-last.
//
// Both layouts are walked in memory order as (outer, C, inner): NCHW is (N, C, H*W), nhwc is
// (N*H*W, C, 1), so element (o, c, i) sits at (o*C + c)*inner + i and one loop serves both.
// Per-channel sums are taken in double (a channel of a ResNet stem holds N*112*112 values), the
// variance in two passes (no cancellation). Single-threaded: these ops run only under
// [model] sync_bn, whose cost docs/benchmarks.md reports; the per-layer all-reduce dominates it.
#include "ops/batchnorm_loops.hpp"

#include <cmath>
#include <vector>

#include "ops/elem.hpp"

namespace kiln::cpu {
namespace {

struct Walk {
  std::int64_t outer, c, inner;
};

Walk walk_of(const BatchNormDesc& d, const Tensor& x) {
  if (x.layout() == Layout::nhwc) return Walk{d.n * d.h * d.w, d.c, 1};
  return Walk{d.n, d.c, d.h * d.w};
}

/// Calls body(c, offset) for every element, in memory order.
template <class Body>
void for_each_element(const Walk& w, Body&& body) {
  for (std::int64_t o = 0; o < w.outer; ++o) {
    for (std::int64_t c = 0; c < w.c; ++c) {
      const std::int64_t base = (o * w.c + c) * w.inner;
      for (std::int64_t i = 0; i < w.inner; ++i) body(c, base + i);
    }
  }
}

}  // namespace

void bn_sync_stats(const BatchNormDesc& d, float* mean, float* var, const Tensor& x) {
  const Walk w = walk_of(d, x);
  const double count = static_cast<double>(d.n * d.h * d.w);
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    const auto* xs = static_cast<const typename E::T*>(x.data());
    std::vector<double> sum(static_cast<std::size_t>(d.c), 0.0), sq(static_cast<std::size_t>(d.c), 0.0);
    for_each_element(w, [&](std::int64_t c, std::int64_t at) { sum[c] += E::load(xs[at]); });
    for (double& s : sum) s /= count;
    for_each_element(w, [&](std::int64_t c, std::int64_t at) {
      const double v = E::load(xs[at]) - sum[c];
      sq[c] += v * v;
    });
    for (std::int64_t c = 0; c < d.c; ++c) {
      mean[c] = static_cast<float>(sum[c]);
      var[c] = static_cast<float>(sq[c] / count);
    }
  });
}

void bn_sync_backward_reduce(const BatchNormDesc& d, float* sum_dy, float* sum_dy_xhat, const Tensor& dy,
                             const Tensor& x, const float* mean, const float* invstd) {
  const Walk w = walk_of(d, x);
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    const auto* xs = static_cast<const typename E::T*>(x.data());
    const auto* gs = static_cast<const typename E::T*>(dy.data());
    std::vector<double> s1(static_cast<std::size_t>(d.c), 0.0), s2(static_cast<std::size_t>(d.c), 0.0);
    for_each_element(w, [&](std::int64_t c, std::int64_t at) {
      const double g = E::load(gs[at]);
      s1[c] += g;
      s2[c] += g * (E::load(xs[at]) - mean[c]);
    });
    for (std::int64_t c = 0; c < d.c; ++c) {
      sum_dy[c] = static_cast<float>(s1[c]);
      sum_dy_xhat[c] = static_cast<float>(s2[c] * invstd[c]);
    }
  });
}

void bn_sync_backward_elemt(const BatchNormDesc& d, const Tensor& dx, const Tensor& dy, const Tensor& x,
                            const float* gamma, const float* mean, const float* invstd, const float* sum_dy,
                            const float* sum_dy_xhat, std::int64_t count) {
  const Walk w = walk_of(d, x);
  // dx = k (dy - mean_dy - (x - mean) slope), per channel.
  std::vector<float> k(static_cast<std::size_t>(d.c)), mean_dy(k.size()), slope(k.size());
  const double inv_count = 1.0 / static_cast<double>(count);
  for (std::int64_t c = 0; c < d.c; ++c) {
    k[c] = gamma[c] * invstd[c];
    mean_dy[c] = static_cast<float>(sum_dy[c] * inv_count);
    slope[c] = static_cast<float>(sum_dy_xhat[c] * inv_count * invstd[c]);
  }
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    const auto* xs = static_cast<const typename E::T*>(x.data());
    const auto* gs = static_cast<const typename E::T*>(dy.data());
    auto* out = static_cast<typename E::T*>(dx.data());
    for_each_element(w, [&](std::int64_t c, std::int64_t at) {
      const float xc = E::load(xs[at]) - mean[c];
      out[at] = E::store(k[c] * (E::load(gs[at]) - mean_dy[c] - xc * slope[c]));
    });
  });
}

}  // namespace kiln::cpu
