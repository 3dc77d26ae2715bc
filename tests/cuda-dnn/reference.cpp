// Float64 references (reference.hpp). Deliberately naive: index arithmetic spelled out per
// definition so a reader can check them against ops.hpp at a glance.
#include "reference.hpp"

#include <cmath>
#include <limits>

namespace kiln::cuda_test {
namespace {

std::size_t at(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t C,
               std::int64_t H, std::int64_t W) {
  return static_cast<std::size_t>(((n * C + c) * H + h) * W + w);
}

/// Calls f(n, k, p, q, c, r, s, ih, iw) for every in-range tap of the convolution.
template <class F>
void for_each_tap(const Conv2dDesc& d, F&& f) {
  const std::int64_t P = d.out_h(), Q = d.out_w(), kg = d.k / d.groups, cg = d.c / d.groups;
  for (std::int64_t n = 0; n < d.n; ++n)
    for (std::int64_t k = 0; k < d.k; ++k)
      for (std::int64_t p = 0; p < P; ++p)
        for (std::int64_t q = 0; q < Q; ++q)
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t r = 0; r < d.r; ++r)
              for (std::int64_t s = 0; s < d.s; ++s) {
                const std::int64_t ih = p * d.stride_h - d.pad_h + r * d.dilation_h;
                const std::int64_t iw = q * d.stride_w - d.pad_w + s * d.dilation_w;
                if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
                f(n, k, p, q, (k / kg) * cg + ci, ci, r, s, ih, iw);
              }
}

}  // namespace

Values ref_conv_forward(const Conv2dDesc& d, const Values& x, const Values& w) {
  const std::int64_t P = d.out_h(), Q = d.out_w(), cg = d.c / d.groups;
  Values y(static_cast<std::size_t>(d.n * d.k * P * Q), 0.0);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto ci, auto r, auto s, auto ih, auto iw) {
    y[at(n, k, p, q, d.k, P, Q)] += x[at(n, c, ih, iw, d.c, d.h, d.w)] * w[at(k, ci, r, s, cg, d.r, d.s)];
  });
  return y;
}

Values ref_conv_backward_data(const Conv2dDesc& d, const Values& dy, const Values& w) {
  const std::int64_t P = d.out_h(), Q = d.out_w(), cg = d.c / d.groups;
  Values dx(static_cast<std::size_t>(d.n * d.c * d.h * d.w), 0.0);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto ci, auto r, auto s, auto ih, auto iw) {
    dx[at(n, c, ih, iw, d.c, d.h, d.w)] += dy[at(n, k, p, q, d.k, P, Q)] * w[at(k, ci, r, s, cg, d.r, d.s)];
  });
  return dx;
}

Values ref_conv_backward_filter(const Conv2dDesc& d, const Values& dy, const Values& x) {
  const std::int64_t P = d.out_h(), Q = d.out_w(), cg = d.c / d.groups;
  Values dw(static_cast<std::size_t>(d.k * cg * d.r * d.s), 0.0);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto ci, auto r, auto s, auto ih, auto iw) {
    dw[at(k, ci, r, s, cg, d.r, d.s)] += dy[at(n, k, p, q, d.k, P, Q)] * x[at(n, c, ih, iw, d.c, d.h, d.w)];
  });
  return dw;
}

BnForward ref_bn_train(const BatchNormDesc& d, const Values& x, const Values& gamma,
                       const Values& beta, const Values& running_mean, const Values& running_var) {
  BnForward out;
  out.y.assign(x.size(), 0.0);
  const double count = static_cast<double>(d.n * d.h * d.w), m = d.momentum;
  for (std::int64_t c = 0; c < d.c; ++c) {
    double sum = 0.0, sq = 0.0;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < d.h * d.w; ++i) sum += x[at(n, c, 0, i, d.c, 1, d.h * d.w)];
    const double mean = sum / count;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < d.h * d.w; ++i) {
        const double v = x[at(n, c, 0, i, d.c, 1, d.h * d.w)] - mean;
        sq += v * v;
      }
    const double var = sq / count, invstd = 1.0 / std::sqrt(var + d.eps);
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < d.h * d.w; ++i) {
        const std::size_t j = at(n, c, 0, i, d.c, 1, d.h * d.w);
        out.y[j] = gamma[c] * (x[j] - mean) * invstd + beta[c];
      }
    out.mean.push_back(mean);
    out.invstd.push_back(invstd);
    out.running_mean.push_back((1 - m) * running_mean[c] + m * mean);
    out.running_var.push_back((1 - m) * running_var[c] + m * var * count / (count - 1));
  }
  return out;
}

Values ref_bn_infer(const BatchNormDesc& d, const Values& x, const Values& gamma,
                    const Values& beta, const Values& running_mean, const Values& running_var) {
  Values y(x.size());
  for (std::int64_t n = 0; n < d.n; ++n)
    for (std::int64_t c = 0; c < d.c; ++c)
      for (std::int64_t i = 0; i < d.h * d.w; ++i) {
        const std::size_t j = at(n, c, 0, i, d.c, 1, d.h * d.w);
        y[j] = gamma[c] * (x[j] - running_mean[c]) / std::sqrt(running_var[c] + d.eps) + beta[c];
      }
  return y;
}

BnBackward ref_bn_backward(const BatchNormDesc& d, const Values& dy, const Values& x,
                           const Values& gamma, const Values& mean, const Values& invstd) {
  BnBackward out;
  out.dx.assign(x.size(), 0.0);
  const double count = static_cast<double>(d.n * d.h * d.w);
  for (std::int64_t c = 0; c < d.c; ++c) {
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < d.h * d.w; ++i) {
        const std::size_t j = at(n, c, 0, i, d.c, 1, d.h * d.w);
        sum_dy += dy[j];
        sum_dy_xhat += dy[j] * (x[j] - mean[c]) * invstd[c];
      }
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < d.h * d.w; ++i) {
        const std::size_t j = at(n, c, 0, i, d.c, 1, d.h * d.w);
        const double xhat = (x[j] - mean[c]) * invstd[c];
        out.dx[j] = gamma[c] * invstd[c] / count * (count * dy[j] - sum_dy - xhat * sum_dy_xhat);
      }
    out.dgamma.push_back(sum_dy_xhat);
    out.dbeta.push_back(sum_dy);
  }
  return out;
}

namespace {

/// Calls f(n, c, p, q, ih, iw) for every in-range element of every window.
template <class F>
void for_each_window_tap(const Pool2dDesc& d, F&& f) {
  for (std::int64_t n = 0; n < d.n; ++n)
    for (std::int64_t c = 0; c < d.c; ++c)
      for (std::int64_t p = 0; p < d.out_h(); ++p)
        for (std::int64_t q = 0; q < d.out_w(); ++q)
          for (std::int64_t r = 0; r < d.kernel_h; ++r)
            for (std::int64_t s = 0; s < d.kernel_w; ++s) {
              const std::int64_t ih = p * d.stride_h - d.pad_h + r, iw = q * d.stride_w - d.pad_w + s;
              if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w) f(n, c, p, q, ih, iw);
            }
}

}  // namespace

Values ref_pool_forward(const Pool2dDesc& d, const Values& x) {
  const std::int64_t P = d.out_h(), Q = d.out_w();
  const bool is_max = d.kind == Pool2dDesc::Kind::max;
  Values y(static_cast<std::size_t>(d.n * d.c * P * Q),
           is_max ? -std::numeric_limits<double>::infinity() : 0.0);
  const double area = static_cast<double>(d.kernel_h * d.kernel_w);
  for_each_window_tap(d, [&](auto n, auto c, auto p, auto q, auto ih, auto iw) {
    double& out = y[at(n, c, p, q, d.c, P, Q)];
    const double v = x[at(n, c, ih, iw, d.c, d.h, d.w)];
    out = is_max ? std::max(out, v) : out + v / area;
  });
  return y;
}

Values ref_pool_backward(const Pool2dDesc& d, const Values& dy, const Values& x) {
  const std::int64_t P = d.out_h(), Q = d.out_w();
  Values dx(x.size(), 0.0);
  if (d.kind == Pool2dDesc::Kind::average) {
    const double area = static_cast<double>(d.kernel_h * d.kernel_w);
    for_each_window_tap(d, [&](auto n, auto c, auto p, auto q, auto ih, auto iw) {
      dx[at(n, c, ih, iw, d.c, d.h, d.w)] += dy[at(n, c, p, q, d.c, P, Q)] / area;
    });
    return dx;
  }
  // Max: the gradient goes to the window's largest element (inputs are distinct, no ties).
  std::vector<std::size_t> argmax(dy.size(), 0);
  Values best(dy.size(), -std::numeric_limits<double>::infinity());
  for_each_window_tap(d, [&](auto n, auto c, auto p, auto q, auto ih, auto iw) {
    const std::size_t o = at(n, c, p, q, d.c, P, Q), i = at(n, c, ih, iw, d.c, d.h, d.w);
    if (x[i] > best[o]) {
      best[o] = x[i];
      argmax[o] = i;
    }
  });
  for (std::size_t o = 0; o < dy.size(); ++o) dx[argmax[o]] += dy[o];
  return dx;
}

Values ref_matmul(std::int64_t m, std::int64_t n, std::int64_t k, const Values& a, Transpose ta,
                  const Values& b, Transpose tb, double alpha, double beta, const Values& c0,
                  const Values& bias) {
  Values c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::int64_t l = 0; l < k; ++l) {
        const double av = ta == Transpose::no ? a[static_cast<std::size_t>(i * k + l)] : a[static_cast<std::size_t>(l * m + i)];
        const double bv = tb == Transpose::no ? b[static_cast<std::size_t>(l * n + j)] : b[static_cast<std::size_t>(j * k + l)];
        sum += av * bv;
      }
      double v = alpha * sum;
      if (beta != 0.0) v += beta * c0[static_cast<std::size_t>(i * n + j)];
      if (!bias.empty()) v += bias[static_cast<std::size_t>(j)];
      c[static_cast<std::size_t>(i * n + j)] = v;
    }
  return c;
}

}  // namespace kiln::cuda_test
