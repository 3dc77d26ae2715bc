// Float64 reference ops for the conformance suite (see reference.hpp): plain loops, one formula
// per function, indexing spelled out so a reader can check each against backend.hpp.
#include "reference.hpp"

#include <cmath>
#include <limits>

#include "kiln/rng.hpp"

namespace kiln::conformance::ref {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

/// Flat index of (a, b, c, d) in a row-major (A, B, C, D) tensor.
std::size_t idx4(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, std::int64_t nb,
                 std::int64_t nc, std::int64_t nd) {
  return at(((a * nb + b) * nc + c) * nd + d);
}

}  // namespace

Vec matmul(std::int64_t m, std::int64_t n, std::int64_t k, const Vec& a, Transpose ta, const Vec& b,
           Transpose tb, double alpha, double beta, const Vec& c0, const Vec* bias) {
  Vec c(at(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double av = ta == Transpose::no ? a[at(i * k + p)] : a[at(p * m + i)];
        const double bv = tb == Transpose::no ? b[at(p * n + j)] : b[at(j * k + p)];
        sum += av * bv;
      }
      double v = alpha * sum;
      if (beta != 0.0) v += beta * c0[at(i * n + j)];  // beta == 0: c is not read (BLAS rule)
      if (bias) v += (*bias)[at(j)];
      c[at(i * n + j)] = v;
    }
  }
  return c;
}

Vec bias_grad(std::int64_t m, std::int64_t n, const Vec& dy, const Vec& db0, Accumulate acc) {
  Vec db = acc == Accumulate::yes ? db0 : Vec(at(n), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) db[at(j)] += dy[at(i * n + j)];
  }
  return db;
}

double activation(Activation act, double x) {
  switch (act) {
    case Activation::relu: return x > 0.0 ? x : 0.0;
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::gelu: return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double activation_derivative(Activation act, double x) {
  switch (act) {
    case Activation::relu: return x > 0.0 ? 1.0 : 0.0;
    case Activation::tanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Activation::sigmoid: {
      const double s = 1.0 / (1.0 + std::exp(-x));
      return s * (1.0 - s);
    }
    case Activation::gelu: {
      const double u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
      const double t = std::tanh(u);
      const double du = kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

bool dropout_keep(std::uint64_t seed, std::int64_t i, float p) {
  return unit_float(derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
}

XentForward softmax_xent_forward(std::int64_t b, std::int64_t k, const Vec& logits, const Vec& labels,
                                 double smoothing) {
  XentForward out;
  out.probs.resize(at(b * k));
  for (std::int64_t i = 0; i < b; ++i) {
    const double* row = &logits[at(i * k)];
    std::int64_t argmax = 0;
    for (std::int64_t j = 1; j < k; ++j) {
      if (row[j] > row[argmax]) argmax = j;
    }
    double sum = 0.0;
    for (std::int64_t j = 0; j < k; ++j) sum += std::exp(row[j] - row[argmax]);
    const double log_sum = std::log(sum);
    const auto label = static_cast<std::int64_t>(labels[at(i)]);
    for (std::int64_t j = 0; j < k; ++j) {
      const double log_p = row[j] - row[argmax] - log_sum;
      out.probs[at(i * k + j)] = std::exp(log_p);
      const double target = (j == label ? 1.0 - smoothing : 0.0) + smoothing / static_cast<double>(k);
      out.loss_sum -= target * log_p;
    }
    if (argmax == label) out.correct += 1.0;
  }
  return out;
}

double top_k_hits(std::int64_t b, std::int64_t k, const Vec& logits, const Vec& labels, std::int64_t top) {
  double hits = 0.0;
  for (std::int64_t i = 0; i < b; ++i) {
    const double* row = &logits[at(i * k)];
    const auto label = static_cast<std::int64_t>(labels[at(i)]);
    if (std::isnan(row[label])) continue;
    std::int64_t above = 0;
    for (std::int64_t j = 0; j < k; ++j) above += row[j] > row[label] || (row[j] == row[label] && j < label);
    if (above < top) hits += 1.0;
  }
  return hits;
}

Vec softmax_xent_backward(std::int64_t b, std::int64_t k, const Vec& probs, const Vec& labels,
                          double smoothing, double scale) {
  Vec d(at(b * k));
  for (std::int64_t i = 0; i < b; ++i) {
    const auto label = static_cast<std::int64_t>(labels[at(i)]);
    for (std::int64_t j = 0; j < k; ++j) {
      const double target = (j == label ? 1.0 - smoothing : 0.0) + smoothing / static_cast<double>(k);
      d[at(i * k + j)] = scale * (probs[at(i * k + j)] - target);
    }
  }
  return d;
}

void sgd(Vec& param, Vec& momentum, const Vec& grad, const SgdStep& s) {
  for (std::size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] + double{s.weight_decay} * param[i];
    if (s.momentum != 0.0f) {
      momentum[i] = double{s.momentum} * momentum[i] + (1.0 - double{s.dampening}) * g;
      g = s.nesterov == SgdStep::Nesterov::yes ? g + double{s.momentum} * momentum[i] : momentum[i];
    }
    param[i] -= double{s.lr} * g;
  }
}

void adam(Vec& param, Vec& m, Vec& v, const Vec& grad, const AdamStep& s) {
  const double bc1 = 1.0 - std::pow(double{s.beta1}, static_cast<double>(s.step));
  const double bc2 = 1.0 - std::pow(double{s.beta2}, static_cast<double>(s.step));
  for (std::size_t i = 0; i < param.size(); ++i) {
    double g = grad[i];
    if (s.decay == AdamStep::Decay::coupled) {
      g += double{s.weight_decay} * param[i];
    } else {
      param[i] *= 1.0 - double{s.lr} * double{s.weight_decay};
    }
    m[i] = double{s.beta1} * m[i] + (1.0 - double{s.beta1}) * g;
    v[i] = double{s.beta2} * v[i] + (1.0 - double{s.beta2}) * g * g;
    param[i] -= double{s.lr} * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + double{s.eps});
  }
}

namespace {

/// Calls f(n, k, p, q, c, r, s, h, w) for every (output, tap) pair whose input (h, w) is inside
/// the image: the one loop nest the three convolution references share.
template <class F>
void for_each_tap(const Conv2dDesc& d, F&& f) {
  const std::int64_t kg = d.k / d.groups, cg = d.c / d.groups;
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t k = 0; k < d.k; ++k) {
      const std::int64_t g = k / kg;
      for (std::int64_t p = 0; p < d.out_h(); ++p) {
        for (std::int64_t q = 0; q < d.out_w(); ++q) {
          for (std::int64_t cl = 0; cl < cg; ++cl) {
            for (std::int64_t r = 0; r < d.r; ++r) {
              const std::int64_t h = p * d.stride_h - d.pad_h + r * d.dilation_h;
              if (h < 0 || h >= d.h) continue;
              for (std::int64_t s = 0; s < d.s; ++s) {
                const std::int64_t w = q * d.stride_w - d.pad_w + s * d.dilation_w;
                if (w < 0 || w >= d.w) continue;
                f(n, k, p, q, g * cg + cl, cl, r, s, h, w);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

Vec conv2d_forward(const Conv2dDesc& d, const Vec& x, const Vec& w) {
  const std::int64_t oh = d.out_h(), ow = d.out_w(), cg = d.c / d.groups;
  Vec y(at(d.n * d.k * oh * ow), 0.0);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto cl, auto r, auto s, auto h, auto wi) {
    y[idx4(n, k, p, q, d.k, oh, ow)] += x[idx4(n, c, h, wi, d.c, d.h, d.w)] * w[idx4(k, cl, r, s, cg, d.r, d.s)];
  });
  return y;
}

Vec conv2d_backward_data(const Conv2dDesc& d, const Vec& dy, const Vec& w) {
  const std::int64_t oh = d.out_h(), ow = d.out_w(), cg = d.c / d.groups;
  Vec dx(at(d.n * d.c * d.h * d.w), 0.0);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto cl, auto r, auto s, auto h, auto wi) {
    dx[idx4(n, c, h, wi, d.c, d.h, d.w)] += dy[idx4(n, k, p, q, d.k, oh, ow)] * w[idx4(k, cl, r, s, cg, d.r, d.s)];
  });
  return dx;
}

Vec conv2d_backward_filter(const Conv2dDesc& d, const Vec& dy, const Vec& x, const Vec& dw0, Accumulate acc) {
  const std::int64_t oh = d.out_h(), ow = d.out_w(), cg = d.c / d.groups;
  Vec dw = acc == Accumulate::yes ? dw0 : Vec(at(d.k * cg * d.r * d.s), 0.0);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto cl, auto r, auto s, auto h, auto wi) {
    dw[idx4(k, cl, r, s, cg, d.r, d.s)] += dy[idx4(n, k, p, q, d.k, oh, ow)] * x[idx4(n, c, h, wi, d.c, d.h, d.w)];
  });
  return dw;
}

BnTrain batchnorm_train(const BatchNormDesc& d, const Vec& x, const Vec& gamma, const Vec& beta,
                        const Vec& running_mean, const Vec& running_var) {
  const std::int64_t count = d.n * d.h * d.w, hw = d.h * d.w;
  BnTrain out{Vec(x.size()), Vec(at(d.c)), Vec(at(d.c)), running_mean, running_var};
  for (std::int64_t c = 0; c < d.c; ++c) {
    double sum = 0.0;
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t i = 0; i < hw; ++i) sum += x[at((n * d.c + c) * hw + i)];
    }
    const double mean = sum / static_cast<double>(count);
    double sq = 0.0;
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t i = 0; i < hw; ++i) {
        const double e = x[at((n * d.c + c) * hw + i)] - mean;
        sq += e * e;
      }
    }
    const double var = sq / static_cast<double>(count);  // biased: what normalises
    const double invstd = 1.0 / std::sqrt(var + double{d.eps});
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::size_t j = at((n * d.c + c) * hw + i);
        out.y[j] = gamma[at(c)] * (x[j] - mean) * invstd + beta[at(c)];
      }
    }
    out.mean[at(c)] = mean;
    out.invstd[at(c)] = invstd;
    const double m = d.momentum;
    const double unbiased = var * static_cast<double>(count) / static_cast<double>(count - 1);
    out.running_mean[at(c)] = (1.0 - m) * running_mean[at(c)] + m * mean;
    out.running_var[at(c)] = (1.0 - m) * running_var[at(c)] + m * unbiased;
  }
  return out;
}

Vec batchnorm_infer(const BatchNormDesc& d, const Vec& x, const Vec& gamma, const Vec& beta,
                    const Vec& running_mean, const Vec& running_var) {
  const std::int64_t hw = d.h * d.w;
  Vec y(x.size());
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t c = 0; c < d.c; ++c) {
      const double invstd = 1.0 / std::sqrt(running_var[at(c)] + double{d.eps});
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::size_t j = at((n * d.c + c) * hw + i);
        y[j] = gamma[at(c)] * (x[j] - running_mean[at(c)]) * invstd + beta[at(c)];
      }
    }
  }
  return y;
}

BnBackward batchnorm_backward(const BatchNormDesc& d, const Vec& dy, const Vec& x, const Vec& gamma,
                              const Vec& mean, const Vec& invstd, const Vec& dgamma0, const Vec& dbeta0) {
  const std::int64_t count = d.n * d.h * d.w, hw = d.h * d.w;
  BnBackward out{Vec(x.size()), dgamma0, dbeta0};
  for (std::int64_t c = 0; c < d.c; ++c) {
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::size_t j = at((n * d.c + c) * hw + i);
        sum_dy += dy[j];
        sum_dy_xhat += dy[j] * (x[j] - mean[at(c)]) * invstd[at(c)];
      }
    }
    const double cnt = static_cast<double>(count);
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::size_t j = at((n * d.c + c) * hw + i);
        const double xhat = (x[j] - mean[at(c)]) * invstd[at(c)];
        out.dx[j] = gamma[at(c)] * invstd[at(c)] / cnt * (cnt * dy[j] - sum_dy - xhat * sum_dy_xhat);
      }
    }
    out.dgamma[at(c)] += sum_dy_xhat;
    out.dbeta[at(c)] += sum_dy;
  }
  return out;
}

namespace {

/// Calls f(n, c, p, q, h, w) for every in-image element (h, w) of every pooling window.
template <class F>
void for_each_window_element(const Pool2dDesc& d, F&& f) {
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t c = 0; c < d.c; ++c) {
      for (std::int64_t p = 0; p < d.out_h(); ++p) {
        for (std::int64_t q = 0; q < d.out_w(); ++q) {
          for (std::int64_t r = 0; r < d.kernel_h; ++r) {
            const std::int64_t h = p * d.stride_h - d.pad_h + r;
            if (h < 0 || h >= d.h) continue;
            for (std::int64_t s = 0; s < d.kernel_w; ++s) {
              const std::int64_t w = q * d.stride_w - d.pad_w + s;
              if (w < 0 || w >= d.w) continue;
              f(n, c, p, q, h, w);
            }
          }
        }
      }
    }
  }
}

}  // namespace

Vec pool2d_forward(const Pool2dDesc& d, const Vec& x) {
  const std::int64_t oh = d.out_h(), ow = d.out_w();
  const bool is_max = d.kind == Pool2dDesc::Kind::max;
  Vec y(at(d.n * d.c * oh * ow), is_max ? -INFINITY : 0.0);
  const double window = static_cast<double>(d.kernel_h * d.kernel_w);  // padding counts (PyTorch default)
  for_each_window_element(d, [&](auto n, auto c, auto p, auto q, auto h, auto w) {
    double& out = y[idx4(n, c, p, q, d.c, oh, ow)];
    const double v = x[idx4(n, c, h, w, d.c, d.h, d.w)];
    out = is_max ? std::max(out, v) : out + v / window;
  });
  return y;
}

Vec pool2d_backward(const Pool2dDesc& d, const Vec& dy, const Vec& x) {
  const std::int64_t oh = d.out_h(), ow = d.out_w();
  Vec dx(x.size(), 0.0);
  if (d.kind == Pool2dDesc::Kind::average) {
    const double window = static_cast<double>(d.kernel_h * d.kernel_w);
    for_each_window_element(d, [&](auto n, auto c, auto p, auto q, auto h, auto w) {
      dx[idx4(n, c, h, w, d.c, d.h, d.w)] += dy[idx4(n, c, p, q, d.c, oh, ow)] / window;
    });
    return dx;
  }
  // Max: each window's gradient goes to its (first) maximum.
  std::vector<std::size_t> argmax(at(d.n * d.c * oh * ow), SIZE_MAX);
  for_each_window_element(d, [&](auto n, auto c, auto p, auto q, auto h, auto w) {
    std::size_t& best = argmax[idx4(n, c, p, q, d.c, oh, ow)];
    const std::size_t j = idx4(n, c, h, w, d.c, d.h, d.w);
    if (best == SIZE_MAX || x[j] > x[best]) best = j;
  });
  for (std::size_t o = 0; o < argmax.size(); ++o) dx[argmax[o]] += dy[o];
  return dx;
}

Vec global_avgpool_forward(std::int64_t n, std::int64_t c, std::int64_t hw, const Vec& x) {
  Vec y(at(n * c), 0.0);
  for (std::int64_t i = 0; i < n * c; ++i) {
    for (std::int64_t j = 0; j < hw; ++j) y[at(i)] += x[at(i * hw + j)];
    y[at(i)] /= static_cast<double>(hw);
  }
  return y;
}

Vec global_avgpool_backward(std::int64_t n, std::int64_t c, std::int64_t hw, const Vec& dy) {
  Vec dx(at(n * c * hw));
  for (std::int64_t i = 0; i < n * c; ++i) {
    for (std::int64_t j = 0; j < hw; ++j) dx[at(i * hw + j)] = dy[at(i)] / static_cast<double>(hw);
  }
  return dx;
}

Vec normalize_image(std::int64_t n, std::int64_t h, std::int64_t w, const Vec& src, const ImageNormalize& norm) {
  Vec dst(at(n * 3 * h * w));
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t c = 0; c < 3; ++c) {
      for (std::int64_t y = 0; y < h; ++y) {
        for (std::int64_t x = 0; x < w; ++x) {
          const double v = src[at(((b * h + y) * w + x) * 3 + c)];
          dst[idx4(b, c, y, x, 3, h, w)] = (v / 255.0 - double{norm.mean[c]}) / double{norm.std[c]};
        }
      }
    }
  }
  return dst;
}

}  // namespace kiln::conformance::ref
