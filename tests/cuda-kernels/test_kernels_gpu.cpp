// Every kernel-group op of the real `cuda` plugin on a GPU, against a float64 host reference
// computed from the values as stored (after rounding to f16/bf16), on fresh random inputs with
// outputs poisoned (all-ones bytes: NaN in every float type) before each call. Error is the
// relative norm ||got - want|| / ||want||: at most 1e-6 for f32, 1e-2 for f16/bf16 (one rounding
// of the output). Sizes include 1, odd counts (vector tails) and views one element into a buffer
// (the scalar, unaligned path). Dropout masks must equal kiln/rng.hpp's formula (and the cpu backend's, when its
// plugin is present) byte for byte.
// Each comparison also prints "op | dtype | layout | size | rel error" for scripts/gpu-check.sh.
// Labelled `gpu`: without a device main() exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_kernels_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <kiln/backend.hpp>
#include <kiln/config/config.hpp>
#include <kiln/errors.hpp>
#include <kiln/plugin/registry.hpp>
#include <kiln/rng.hpp>

#include "../gpu/cuda_device_skip.hpp"

namespace {

using kiln::Activation;
using kiln::DType;
using kiln::Layout;
using kiln::MemoryKind;
using kiln::Shape;
using kiln::Tensor;
using Values = std::vector<double>;

// ---- plugins ----------------------------------------------------------------------------------

// Never destroyed: objects made by plugin code must not outlive that code.
const kiln::plugin::Registry& registry() {
  static kiln::plugin::Registry* reg = [] {
    auto* r = new kiln::plugin::Registry({KILN_TEST_PLUGIN_DIR});
    r->scan();
    return r;
  }();
  return *reg;
}

kiln::Backend& backend(const std::string& name) {
  static std::map<std::string, std::shared_ptr<kiln::Backend>*> made;
  auto& slot = made[name];
  if (slot == nullptr) {
    const auto& info = registry().require(KILN_KIND_BACKEND, name, "backend");
    auto cfg = kiln::config::Config::parse("[backend]\n", "test.toml", {});
    static std::vector<std::unique_ptr<kiln::ParamMap>> params;  // outlive the backends
    params.push_back(std::make_unique<kiln::ParamMap>(cfg.validate("backend", info.params)));
    kiln::PluginArgs args;
    args.params = params.back().get();
    slot = new std::shared_ptr<kiln::Backend>(registry().create_backend(info, args));
  }
  return **slot;
}

kiln::Backend& cuda() { return backend("cuda"); }
kiln::Backend& cpu() { return backend("cpu"); }

// ---- host values ------------------------------------------------------------------------------

void store(void* base, std::int64_t i, DType d, double v) {
  const float f = static_cast<float>(v);
  switch (d) {
    case DType::f32: static_cast<float*>(base)[i] = f; return;
    case DType::f16: static_cast<__half*>(base)[i] = __float2half_rn(f); return;
    case DType::bf16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(f); return;
    case DType::i32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(v); return;
    case DType::u8: static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(v); return;
    default: throw std::logic_error("test store: unsupported dtype");
  }
}

double load(const void* base, std::int64_t i, DType d) {
  switch (d) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return __half2float(static_cast<const __half*>(base)[i]);
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case DType::i32: return static_cast<const std::int32_t*>(base)[i];
    case DType::u8: return static_cast<const std::uint8_t*>(base)[i];
    default: throw std::logic_error("test load: unsupported dtype");
  }
}

/// The values as `d` stores them (what the kernel actually reads).
Values rounded(const Values& v, DType d) {
  Tensor t = kiln::host_tensor({static_cast<std::int64_t>(v.size())}, d);
  Values out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    store(t.data(), static_cast<std::int64_t>(i), d, v[i]);
    out[i] = load(t.data(), static_cast<std::int64_t>(i), d);
  }
  return out;
}

std::mt19937_64& rng() {
  static std::mt19937_64 r(20261129);
  return r;
}

Values uniform(std::int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Values v(static_cast<std::size_t>(n));
  for (double& x : v) x = dist(rng());
  return v;
}

// ---- device tensors ---------------------------------------------------------------------------

/// Where a device tensor starts: at its allocation (16-byte aligned: vector path) or one element
/// in (scalar path).
enum class Placement { aligned, offset_by_one };

/// An uninitialised device tensor; offset_by_one views a 1-D tensor one element into its buffer.
Tensor device_tensor(const Shape& shape, DType d, Layout layout = Layout::row_major,
                     Placement where = Placement::aligned) {
  if (where == Placement::offset_by_one) {
    const std::int64_t n = kiln::shape_numel(shape);
    Tensor buffer = cuda().allocate({n + 1}, d, MemoryKind::device);
    return buffer.view(1, shape);
  }
  Tensor t = cuda().allocate(shape, d, MemoryKind::device);
  return layout == Layout::row_major ? t : t.with_layout(layout);
}

Tensor host_like(const Tensor& t) {
  Tensor h = kiln::host_tensor(t.shape(), t.dtype());
  return t.layout() == Layout::row_major ? h : h.with_layout(t.layout());
}

/// Writes v (in memory order) into device tensor t.
void upload(const Tensor& t, const Values& v) {
  Tensor h = host_like(t);
  for (std::int64_t i = 0; i < t.numel(); ++i) store(h.data(), i, t.dtype(), v[static_cast<std::size_t>(i)]);
  cuda().copy(h, t);
  cuda().synchronize();
}

/// All-ones bytes: NaN in f32, f16 and bf16, 0xff in u8, -1 in i32.
void poison(const Tensor& t) {
  Tensor h = host_like(t);
  std::memset(h.data(), 0xff, h.bytes());
  cuda().copy(h, t);
  cuda().synchronize();
}

Tensor device_with(const Shape& shape, DType d, const Values& v, Layout layout = Layout::row_major,
                   Placement where = Placement::aligned) {
  Tensor t = device_tensor(shape, d, layout, where);
  upload(t, v);
  return t;
}

Tensor poisoned(const Shape& shape, DType d, Layout layout = Layout::row_major,
                Placement where = Placement::aligned) {
  Tensor t = device_tensor(shape, d, layout, where);
  poison(t);
  return t;
}

/// Memory-order values of a device tensor (synchronizes: the host copy completes on return).
Values download(const Tensor& t) {
  Tensor h = host_like(t);
  cuda().copy(t, h);
  Values v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = load(h.data(), i, t.dtype());
  return v;
}

// ---- comparison -------------------------------------------------------------------------------

double tolerance(DType d) { return d == DType::f32 ? 1e-6 : 1e-2; }

/// ||got - want|| / ||want|| (infinite if got has a NaN or inf where want is finite).
double rel_error(const Values& got, const Values& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (norm == 0.0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}

/// ||sizes|| / ||want||: how much a sum whose terms' magnitudes add up to `sizes` amplifies their
/// rounding (1 when nothing cancels).
double condition(const Values& sizes, const Values& want) {
  double s = 0.0, w = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    s += sizes[i] * sizes[i];
    w += want[i] * want[i];
  }
  return w > 0.0 ? std::max(1.0, std::sqrt(s / w)) : 1.0;
}

std::string layout_name(Layout l) { return l == Layout::nhwc ? "nhwc" : "row-major"; }

/// Checks and reports one comparison.
void expect_close(const std::string& op, DType d, const std::string& what, const Values& got,
                  const Values& want, double tol) {
  const double err = rel_error(got, want);
  std::printf("KERNEL-CHECK | %-28s | %-4s | %-36s | %.3e | %s\n", op.c_str(),
              std::string(kiln::dtype_name(d)).c_str(), what.c_str(), err, err <= tol ? "ok" : "FAIL");
  BOOST_TEST(err <= tol, op << " " << kiln::dtype_name(d) << " " << what << ": relative error " << err
                            << " exceeds " << tol);
}

const DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
const std::int64_t kSizes[] = {1, 4099, (1 << 20) + 3};

double act_ref(Activation a, double x) {
  switch (a) {
    case Activation::relu: return x < 0 ? 0 : x;
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::gelu: {
      const double c = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
    }
  }
  return 0;
}

/// act'(saved): saved = y for relu/tanh/sigmoid, x for gelu.
double act_grad_ref(Activation a, double s) {
  switch (a) {
    case Activation::relu: return s > 0 ? 1 : 0;
    case Activation::tanh: return 1 - s * s;
    case Activation::sigmoid: return s * (1 - s);
    case Activation::gelu: {
      const double c = std::sqrt(2.0 / std::numbers::pi);
      const double t = std::tanh(c * (s + 0.044715 * s * s * s));
      return 0.5 * (1 + t) + 0.5 * s * (1 - t * t) * c * (1 + 3 * 0.044715 * s * s);
    }
  }
  return 0;
}

/// Reports an exact (bitwise) comparison.
void report_mismatches(const std::string& op, DType d, const std::string& what, std::int64_t mismatches) {
  std::printf("KERNEL-CHECK | %-28s | %-4s | %-36s | %lld mismatches | %s\n", op.c_str(),
              std::string(kiln::dtype_name(d)).c_str(), what.c_str(), static_cast<long long>(mismatches),
              mismatches == 0 ? "ok" : "FAIL");
}

std::string size_text(std::int64_t n, Placement where) {
  return "n=" + std::to_string(n) + (where == Placement::offset_by_one ? " offset" : "");
}

}  // namespace

// ---- element-wise -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(activations_forward_and_backward) {
  for (DType d : kFloatTypes) {
    for (std::int64_t n : kSizes) {
      for (Placement where : {Placement::aligned, Placement::offset_by_one}) {
        for (Activation a : {Activation::relu, Activation::tanh, Activation::sigmoid, Activation::gelu}) {
          const std::string what = std::string(kiln::activation_name(a)) + " " + size_text(n, where);
          const Values x = rounded(uniform(n, -3, 3), d);
          const Tensor xd = device_with({n}, d, x, Layout::row_major, where);
          const Tensor yd = poisoned({n}, d, Layout::row_major, where);
          cuda().activation_forward(yd, xd, a);
          Values want(x.size());
          for (std::size_t i = 0; i < x.size(); ++i) want[i] = act_ref(a, x[i]);
          const Values y = download(yd);
          expect_close("activation_forward", d, what, y, want, tolerance(d));

          // Backward from the stored y (x for gelu), overwrite and accumulate.
          const Values dy = rounded(uniform(n, -1, 1), d);
          const Tensor dyd = device_with({n}, d, dy, Layout::row_major, where);
          const Values& saved = a == Activation::gelu ? x : y;
          for (kiln::Accumulate acc : {kiln::Accumulate::no, kiln::Accumulate::yes}) {
            const Values dx0 = rounded(uniform(n, -1, 1), d);
            const Tensor dxd = acc == kiln::Accumulate::yes ? device_with({n}, d, dx0, Layout::row_major, where)
                                                            : poisoned({n}, d, Layout::row_major, where);
            cuda().activation_backward(dxd, dyd, xd, yd, a, acc);
            Values want_dx(x.size());
            for (std::size_t i = 0; i < x.size(); ++i) {
              want_dx[i] = (acc == kiln::Accumulate::yes ? dx0[i] : 0.0) + dy[i] * act_grad_ref(a, saved[i]);
            }
            expect_close("activation_backward", d, what + (acc == kiln::Accumulate::yes ? " acc" : ""),
                         download(dxd), want_dx, tolerance(d));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(add_relu_add_and_scale) {
  for (DType d : kFloatTypes) {
    for (std::int64_t n : kSizes) {
      for (Placement where : {Placement::aligned, Placement::offset_by_one}) {
        const std::string what = size_text(n, where);
        const Values a = rounded(uniform(n, -2, 2), d), b = rounded(uniform(n, -2, 2), d);
        const Tensor ad = device_with({n}, d, a, Layout::row_major, where);
        const Tensor bd = device_with({n}, d, b, Layout::row_major, where);
        Values sum(a.size()), relu(a.size()), scaled(a.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
          sum[i] = a[i] + b[i];
          relu[i] = sum[i] < 0 ? 0 : sum[i];
          scaled[i] = a[i] * -0.375;
        }
        const Tensor yd = poisoned({n}, d, Layout::row_major, where);
        cuda().add_relu_forward(yd, ad, bd);
        expect_close("add_relu_forward", d, what, download(yd), relu, tolerance(d));
        const Tensor cd = poisoned({n}, d, Layout::row_major, where);
        cuda().add(cd, ad, bd);
        expect_close("add", d, what, download(cd), sum, tolerance(d));
        cuda().add(ad, ad, bd);  // c aliases a
        expect_close("add", d, what + " in place", download(ad), sum, tolerance(d));
        cuda().scale(bd, -0.375f);
        Values want_b(b.size());
        for (std::size_t i = 0; i < b.size(); ++i) want_b[i] = b[i] * -0.375;
        expect_close("scale", d, what, download(bd), want_b, tolerance(d));
      }
    }
  }
}

// Lerp against torch.lerp's formula evaluated on the host in f32, element for element: each side
// rounds once per operation or fuses its multiply-add (the contract allows either; nvcc fuses).
// Weights on both sides of 0.5; 0 leaves dst and 1 gives src bit for bit; src may be dst.
BOOST_AUTO_TEST_CASE(lerp_matches_the_host_formula) {
  const std::pair<float, const char*> weights[] = {{0.0f, "0"},   {1e-4f, "1e-4"}, {0.25f, "0.25"},
                                                   {0.5f, "0.5"}, {0.75f, "0.75"}, {1.0f, "1"}};
  for (std::int64_t n : kSizes) {
    for (Placement where : {Placement::aligned, Placement::offset_by_one}) {
      const Values d0 = rounded(uniform(n, -2, 2), DType::f32), s = rounded(uniform(n, -2, 2), DType::f32);
      const Tensor sd = device_with({n}, DType::f32, s, Layout::row_major, where);
      for (const auto& [w, label] : weights) {
        const std::string what = std::string("weight ") + label + " " + size_text(n, where);
        const Tensor dd = device_with({n}, DType::f32, d0, Layout::row_major, where);
        cuda().lerp(dd, sd, w);
        const Values got = download(dd);
        std::int64_t mismatches = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          const float a = static_cast<float>(d0[i]), b = static_cast<float>(s[i]), diff = b - a;
          volatile float part = w < 0.5f ? w * diff : diff * (1.0f - w);  // rounded on its own, never fused
          const float plain = w < 0.5f ? a + part : b - part;
          const float fused = w < 0.5f ? std::fma(w, diff, a) : std::fma(-diff, 1.0f - w, b);
          mismatches += got[i] != double{plain} && got[i] != double{fused};
        }
        report_mismatches("lerp", DType::f32, what, mismatches);
        BOOST_TEST(mismatches == 0, what << ": " << mismatches << " elements differ from torch.lerp's formula");
        if (w == 0.0f) BOOST_TEST((got == d0), what << ": dst changed");
        if (w == 1.0f) BOOST_TEST((got == s), what << ": dst is not src");
      }
      const Tensor same = device_with({n}, DType::f32, d0, Layout::row_major, where);
      cuda().lerp(same, same, 0.75f);  // src is dst: s - d = 0, nothing moves
      BOOST_TEST((download(same) == d0), "lerp in place " << size_text(n, where));
    }
  }
}

BOOST_AUTO_TEST_CASE(cast_rounds_like_the_host) {
  for (DType low : {DType::f16, DType::bf16}) {
    for (std::int64_t n : kSizes) {
      for (Placement where : {Placement::aligned, Placement::offset_by_one}) {
        const std::string what = size_text(n, where);
        const Values x = rounded(uniform(n, -70000, 70000), DType::f32);
        const Tensor xd = device_with({n}, DType::f32, x, Layout::row_major, where);
        const Tensor ld = poisoned({n}, low, Layout::row_major, where);
        cuda().cast(ld, xd);
        // Exactly the host's round-to-nearest-even (f16 overflows to inf beyond 65520).
        const Values got = download(ld), want = rounded(x, low);
        std::int64_t mismatches = 0;
        for (std::size_t i = 0; i < got.size(); ++i) mismatches += got[i] == want[i] ? 0 : 1;
        BOOST_TEST(mismatches == 0, "cast f32 -> " << kiln::dtype_name(low) << " " << what);
        report_mismatches("cast f32->" + std::string(kiln::dtype_name(low)), low, what, mismatches);
        const Tensor back = poisoned({n}, DType::f32, Layout::row_major, where);
        cuda().cast(back, ld);
        const Values back_values = download(back);
        mismatches = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          mismatches += back_values[i] == want[i] ? 0 : 1;
        }
        BOOST_TEST(mismatches == 0, "cast " << kiln::dtype_name(low) << " -> f32 " << what);
      }
    }
  }
  // Same-dtype cast is a copy.
  const Values x = uniform(1000, -1, 1);
  const Tensor a = device_with({1000}, DType::bf16, x);
  const Tensor b = poisoned({1000}, DType::bf16);
  cuda().cast(b, a);
  expect_close("cast", DType::bf16, "same dtype copy", download(b), download(a), 0.0);
}

BOOST_AUTO_TEST_CASE(check_finite_sets_the_flag_only_for_inf_or_nan) {
  for (DType d : kFloatTypes) {
    for (std::int64_t n : kSizes) {
      Values v = uniform(n, -60000, 60000);
      const Tensor t = device_with({n}, d, v);
      const Tensor flag = device_with({1}, DType::i32, {0});
      cuda().check_finite(flag, t);
      BOOST_TEST(download(flag)[0] == 0.0, "finite " << kiln::dtype_name(d) << " n=" << n);
      for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN()}) {
        Values w = v;
        w[static_cast<std::size_t>(rng()() % static_cast<std::uint64_t>(n))] = bad;
        const Tensor tb = device_with({n}, d, w);
        const Tensor fb = device_with({1}, DType::i32, {0});
        cuda().check_finite(fb, tb);
        BOOST_TEST(download(fb)[0] == 1.0, "non-finite " << bad << " " << kiln::dtype_name(d) << " n=" << n);
      }
      const Tensor set = device_with({1}, DType::i32, {1});
      cuda().check_finite(set, t);  // a finite tensor leaves a raised flag raised
      BOOST_TEST(download(set)[0] == 1.0);
    }
  }
  std::printf("KERNEL-CHECK | %-28s | %-4s | %-36s | %s\n", "check_finite", "all", "inf/NaN/finite", "done");
}

BOOST_AUTO_TEST_CASE(dropout_masks_equal_the_cpu_backends) {
  for (DType d : kFloatTypes) {
    for (std::int64_t n : kSizes) {
      for (float p : {0.0f, 0.3f}) {
        const std::string what = "p=" + std::to_string(p).substr(0, 3) + " n=" + std::to_string(n);
        const std::uint64_t seed = 0x5eed0000ull + static_cast<std::uint64_t>(n);
        const Values x = rounded(uniform(n, -2, 2), d);
        const Tensor xd = device_with({n}, d, x);
        const Tensor yd = poisoned({n}, d), md = poisoned({n}, DType::u8);
        cuda().dropout_forward(yd, md, xd, p, seed);

        // The mask formula of kiln/rng.hpp, which the cpu backend uses too.
        const Values mask = download(md);
        std::int64_t mismatches = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const bool keep = kiln::unit_float(kiln::derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
          mismatches += mask[static_cast<std::size_t>(i)] == (keep ? 1.0 : 0.0) ? 0 : 1;
        }
        BOOST_TEST(mismatches == 0, "dropout mask vs rng.hpp " << kiln::dtype_name(d) << " " << what);
        report_mismatches("dropout mask vs rng.hpp", d, what, mismatches);
        // And the cpu backend itself, where its plugin was carried along (it needs oneDNN).
        if (registry().find(KILN_KIND_BACKEND, "cpu") != nullptr) {
          Tensor xh = kiln::host_tensor({n}, d), yh = kiln::host_tensor({n}, d), mh = kiln::host_tensor({n}, DType::u8);
          for (std::int64_t i = 0; i < n; ++i) store(xh.data(), i, d, x[static_cast<std::size_t>(i)]);
          cpu().dropout_forward(yh, mh, xh, p, seed);
          mismatches = 0;
          for (std::int64_t i = 0; i < n; ++i) {
            mismatches += mask[static_cast<std::size_t>(i)] == mh.data_as<std::uint8_t>()[i] ? 0 : 1;
          }
          BOOST_TEST(mismatches == 0, "dropout mask vs cpu " << kiln::dtype_name(d) << " " << what);
          report_mismatches("dropout mask vs cpu backend", d, what, mismatches);
        }

        Values want(x.size());
        const double inv_keep = 1.0 / (1.0 - static_cast<double>(p));
        for (std::size_t i = 0; i < x.size(); ++i) want[i] = mask[i] != 0 ? x[i] * inv_keep : 0.0;
        expect_close("dropout_forward", d, what, download(yd), want, tolerance(d));

        const Values dy = rounded(uniform(n, -1, 1), d);
        const Tensor dyd = device_with({n}, d, dy), dxd = poisoned({n}, d);
        cuda().dropout_backward(dxd, dyd, md, p);
        for (std::size_t i = 0; i < x.size(); ++i) want[i] = mask[i] != 0 ? dy[i] * inv_keep : 0.0;
        expect_close("dropout_backward", d, what, download(dxd), want, tolerance(d));
      }
    }
  }
}

// ---- loss -------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(softmax_xent_forward_backward_and_determinism) {
  for (std::int64_t classes : {10, 1000}) {
    for (float s : {0.0f, 0.1f}) {
      const std::int64_t rows = 67;
      const std::string what = "B=67 K=" + std::to_string(classes) + " s=" + std::to_string(s).substr(0, 3);
      const Values x = rounded(uniform(rows * classes, -4, 4), DType::f32);
      Values labels(static_cast<std::size_t>(rows));
      Values want_p(x.size());
      double want_loss = 0.0, want_correct = 0.0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double* xr = x.data() + r * classes;
        std::int64_t argmax = 0;
        for (std::int64_t k = 1; k < classes; ++k) argmax = xr[k] > xr[argmax] ? k : argmax;
        // About half the rows are labelled with their argmax, so the count is non-trivial.
        const std::int64_t label = r % 2 == 0 ? argmax : static_cast<std::int64_t>(rng()() % classes);
        labels[static_cast<std::size_t>(r)] = static_cast<double>(label);
        double sum = 0.0, sum_x = 0.0;
        for (std::int64_t k = 0; k < classes; ++k) {
          sum += std::exp(xr[k] - xr[argmax]);
          sum_x += xr[k];
        }
        const double lse = xr[argmax] + std::log(sum);
        for (std::int64_t k = 0; k < classes; ++k) want_p[static_cast<std::size_t>(r * classes + k)] = std::exp(xr[k] - lse);
        want_loss += lse - (1.0 - s) * xr[label] - s / static_cast<double>(classes) * sum_x;
        want_correct += label == argmax ? 1.0 : 0.0;
      }
      const Tensor logits = device_with({rows, classes}, DType::f32, x);
      const Tensor labels_d = device_with({rows}, DType::i32, labels);
      const Tensor probs = poisoned({rows, classes}, DType::f32);
      const Tensor stats = device_with({2}, DType::f32, {1.5, 2.0});
      cuda().softmax_xent_forward(probs, stats, logits, labels_d, s);
      const Values got_p = download(probs), got_stats = download(stats);
      expect_close("softmax_xent_forward probs", DType::f32, what, got_p, want_p, 1e-6);
      expect_close("softmax_xent_forward loss", DType::f32, what, {got_stats[0]}, {1.5 + want_loss}, 1e-6);
      BOOST_TEST(got_stats[1] == 2.0 + want_correct, what);

      // Deterministic: the same call from the same state gives the same bits.
      const Tensor stats2 = device_with({2}, DType::f32, {1.5, 2.0});
      cuda().softmax_xent_forward(probs, stats2, logits, labels_d, s);
      BOOST_TEST(download(stats2)[0] == got_stats[0], "softmax_xent_forward repeatable " << what);

      const float scale = 0.25f;
      const Tensor dlogits = poisoned({rows, classes}, DType::f32);
      cuda().softmax_xent_backward(dlogits, probs, labels_d, s, scale);
      Values want_d(x.size());
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < classes; ++k) {
          const std::size_t i = static_cast<std::size_t>(r * classes + k);
          const double target = (k == static_cast<std::int64_t>(labels[static_cast<std::size_t>(r)]) ? 1.0 - s : 0.0) +
                                s / static_cast<double>(classes);
          want_d[i] = scale * (got_p[i] - target);
        }
      }
      expect_close("softmax_xent_backward", DType::f32, what, download(dlogits), want_d, 1e-6);
    }
  }
  // A label outside [0, K) cannot be reported by index without a synchronize: the loss is NaN.
  const Tensor logits = device_with({2, 3}, DType::f32, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6});
  const Tensor labels_d = device_with({2}, DType::i32, {1, 3});
  const Tensor probs = poisoned({2, 3}, DType::f32);
  const Tensor stats = device_with({2}, DType::f32, {0.0, 0.0});
  cuda().softmax_xent_forward(probs, stats, logits, labels_d, 0.0f);
  BOOST_TEST(std::isnan(download(stats)[0]));
}

// Top-k hits against the host rule (a class ranks above the label when its logit is greater, or
// equal at a lower index; a NaN label logit never counts), on logits full of ties, for ImageNet's
// 1000 classes too; the count accumulates and is the same from call to call.
BOOST_AUTO_TEST_CASE(top_k_hits_match_the_host_rule) {
  for (std::int64_t classes : {10, 1000}) {
    const std::int64_t rows = 67;
    Values x(static_cast<std::size_t>(rows * classes)), labels(static_cast<std::size_t>(rows));
    for (double& v : x) v = static_cast<double>(rng()() % 4);  // whole numbers: many ties
    for (double& l : labels) l = static_cast<double>(rng()() % static_cast<std::uint64_t>(classes));
    x[static_cast<std::size_t>(3 * classes + static_cast<std::int64_t>(labels[3]))] = std::nan("");
    const Tensor logits = device_with({rows, classes}, DType::f32, x);
    const Tensor labels_d = device_with({rows}, DType::i32, labels);
    for (std::int64_t k : {std::int64_t{1}, std::int64_t{5}, classes}) {
      double want = 0.0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double* xr = x.data() + r * classes;
        const auto y = static_cast<std::int64_t>(labels[static_cast<std::size_t>(r)]);
        if (std::isnan(xr[y])) continue;
        std::int64_t above = 0;
        for (std::int64_t c = 0; c < classes; ++c) above += xr[c] > xr[y] || (xr[c] == xr[y] && c < y);
        want += above < k ? 1.0 : 0.0;
      }
      const std::string what = "K=" + std::to_string(classes) + " k=" + std::to_string(k);
      const Tensor count = device_with({1}, DType::f32, {4.0});
      cuda().top_k_hits(count, logits, labels_d, k);
      BOOST_TEST(download(count)[0] == 4.0 + want, what);
      cuda().top_k_hits(count, logits, labels_d, k);
      BOOST_TEST(download(count)[0] == 4.0 + 2 * want, what);
    }
  }
}

// ---- optimizers -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(sgd_variants_match_the_reference) {
  struct Variant {
    const char* name;
    kiln::SgdStep step;
  };
  std::vector<Variant> variants(4);
  variants[0] = {"plain wd", {0.1f, 0.0f, 0.0f, 1e-2f, kiln::SgdStep::Nesterov::no}};
  variants[1] = {"momentum", {0.1f, 0.9f, 0.0f, 0.0f, kiln::SgdStep::Nesterov::no}};
  variants[2] = {"momentum dampening wd", {0.05f, 0.8f, 0.1f, 1e-3f, kiln::SgdStep::Nesterov::no}};
  variants[3] = {"nesterov wd", {0.1f, 0.9f, 0.0f, 1e-4f, kiln::SgdStep::Nesterov::yes}};
  for (const Variant& v : variants) {
    for (std::int64_t n : kSizes) {
      for (Placement where : {Placement::aligned, Placement::offset_by_one}) {
        const std::string what = std::string(v.name) + " " + size_text(n, where);
        const Values p = uniform(n, -1, 1), g = uniform(n, -1, 1), b = uniform(n, -0.5, 0.5);
        const Tensor pd = device_with({n}, DType::f32, rounded(p, DType::f32), Layout::row_major, where);
        const Tensor gd = device_with({n}, DType::f32, rounded(g, DType::f32), Layout::row_major, where);
        const Tensor bd = device_with({n}, DType::f32, rounded(b, DType::f32), Layout::row_major, where);
        cuda().sgd_update(pd, v.step.momentum == 0.0f ? Tensor() : bd, gd, v.step);
        const Values pr = rounded(p, DType::f32), gr = rounded(g, DType::f32), br = rounded(b, DType::f32);
        Values want_p(pr.size()), want_b(br);
        const kiln::SgdStep& s = v.step;
        for (std::size_t i = 0; i < pr.size(); ++i) {
          const double gi = gr[i] + static_cast<double>(s.weight_decay) * pr[i];
          if (s.momentum == 0.0f) {
            want_p[i] = pr[i] - static_cast<double>(s.lr) * gi;
            continue;
          }
          const double bi = static_cast<double>(s.momentum) * br[i] + (1.0 - static_cast<double>(s.dampening)) * gi;
          want_b[i] = bi;
          const double step = s.nesterov == kiln::SgdStep::Nesterov::yes ? gi + static_cast<double>(s.momentum) * bi : bi;
          want_p[i] = pr[i] - static_cast<double>(s.lr) * step;
        }
        expect_close("sgd_update param", DType::f32, what, download(pd), want_p, 1e-6);
        expect_close("sgd_update momentum", DType::f32, what, download(bd), want_b, 1e-6);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(adam_and_adamw_match_the_reference) {
  for (auto decay : {kiln::AdamStep::Decay::coupled, kiln::AdamStep::Decay::decoupled}) {
    for (std::int64_t t : {1, 10}) {
      for (std::int64_t n : kSizes) {
        for (Placement where : {Placement::aligned, Placement::offset_by_one}) {
          kiln::AdamStep s;
          s.lr = 1e-2f;
          s.weight_decay = 0.05f;
          s.step = t;
          s.decay = decay;
          const std::string what = std::string(decay == kiln::AdamStep::Decay::coupled ? "adam" : "adamw") +
                                   " t=" + std::to_string(t) + " " + size_text(n, where);
          const Values p = rounded(uniform(n, -1, 1), DType::f32), g = rounded(uniform(n, -1, 1), DType::f32);
          const Values m = rounded(uniform(n, -0.1, 0.1), DType::f32), v = rounded(uniform(n, 0, 0.01), DType::f32);
          const Tensor pd = device_with({n}, DType::f32, p, Layout::row_major, where);
          const Tensor gd = device_with({n}, DType::f32, g, Layout::row_major, where);
          const Tensor md = device_with({n}, DType::f32, m, Layout::row_major, where);
          const Tensor vd = device_with({n}, DType::f32, v, Layout::row_major, where);
          cuda().adam_update(pd, md, vd, gd, s);
          const double b1 = s.beta1, b2 = s.beta2, lr = s.lr, wd = s.weight_decay, eps = s.eps;
          const double bias1 = 1 - std::pow(b1, static_cast<double>(t)), bias2 = 1 - std::pow(b2, static_cast<double>(t));
          // Each result is a sum of two terms that can cancel (m = b1 m + (1 - b1) g with opposite
          // signs, p - step), and f32 rounds each term, not the sum: the tolerance grows by the
          // sum's condition number ||sum of |terms| || / ||sum||. It matters for n = 1, where one
          // near-cancelling element is the whole norm (6.7e-6 relative on an H200, 2026-12-04).
          Values want_p(p.size()), want_m(p.size()), want_v(p.size()), size_p(p.size()), size_m(p.size());
          for (std::size_t i = 0; i < p.size(); ++i) {
            const double pi = decay == kiln::AdamStep::Decay::decoupled ? p[i] * (1 - lr * wd) : p[i];
            const double gi = g[i] + (decay == kiln::AdamStep::Decay::coupled ? wd * pi : 0.0);
            want_m[i] = b1 * m[i] + (1 - b1) * gi;
            want_v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            const double step = lr / bias1 * want_m[i] / (std::sqrt(want_v[i] / bias2) + eps);
            want_p[i] = pi - step;
            size_m[i] = b1 * std::fabs(m[i]) + (1 - b1) * std::fabs(gi);
            size_p[i] = std::fabs(pi) + std::fabs(step);
          }
          expect_close("adam_update param", DType::f32, what, download(pd), want_p, 1e-6 * condition(size_p, want_p));
          expect_close("adam_update m", DType::f32, what, download(md), want_m, 1e-6 * condition(size_m, want_m));
          expect_close("adam_update v", DType::f32, what, download(vd), want_v, 1e-6);
        }
      }
    }
  }
}

// ---- images -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(global_avgpool_honours_each_layout) {
  const Shape shapes[] = {{3, 37, 7, 7}, {2, 5, 1, 1}, {8, 2048, 7, 7}, {2, 3, 33, 31}};
  for (DType d : kFloatTypes) {
    for (Layout layout : {Layout::row_major, Layout::nhwc}) {
      for (const Shape& shape : shapes) {
        const std::int64_t n = shape[0], c = shape[1], hw = shape[2] * shape[3];
        const std::string what = layout_name(layout) + " " + kiln::shape_string(shape);
        // mem(n, c, j): the memory index of logical (n, c, pixel j) in this layout.
        const auto mem = [&](std::int64_t i, std::int64_t ch, std::int64_t j) {
          return layout == Layout::nhwc ? (i * hw + j) * c + ch : (i * c + ch) * hw + j;
        };
        const Values x = rounded(uniform(n * c * hw, -2, 2), d);
        const Tensor xd = device_with(shape, d, x, layout);
        const Tensor yd = poisoned({n, c}, d);
        cuda().global_avgpool_forward(yd, xd);
        Values want(static_cast<std::size_t>(n * c));
        for (std::int64_t i = 0; i < n; ++i) {
          for (std::int64_t ch = 0; ch < c; ++ch) {
            double sum = 0.0;
            for (std::int64_t j = 0; j < hw; ++j) sum += x[static_cast<std::size_t>(mem(i, ch, j))];
            want[static_cast<std::size_t>(i * c + ch)] = sum / static_cast<double>(hw);
          }
        }
        expect_close("global_avgpool_forward", d, what, download(yd), want, tolerance(d));

        const Values dy = rounded(uniform(n * c, -1, 1), d);
        const Tensor dyd = device_with({n, c}, d, dy);
        const Tensor dxd = poisoned(shape, d, layout);
        cuda().global_avgpool_backward(dxd, dyd);
        Values want_dx(x.size());
        for (std::int64_t i = 0; i < n; ++i) {
          for (std::int64_t ch = 0; ch < c; ++ch) {
            for (std::int64_t j = 0; j < hw; ++j) {
              want_dx[static_cast<std::size_t>(mem(i, ch, j))] = dy[static_cast<std::size_t>(i * c + ch)] / static_cast<double>(hw);
            }
          }
        }
        expect_close("global_avgpool_backward", d, what, download(dxd), want_dx, tolerance(d));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(normalize_image_honours_the_destination_layout) {
  kiln::ImageNormalize norm;
  for (DType d : kFloatTypes) {
    for (Layout layout : {Layout::row_major, Layout::nhwc}) {
      for (const Shape& hw_shape : {Shape{3, 17, 19}, Shape{1, 1, 1}, Shape{16, 64, 64}}) {
        const std::int64_t n = hw_shape[0], h = hw_shape[1], w = hw_shape[2], hw = h * w;
        const std::string what = layout_name(layout) + " " + kiln::shape_string(hw_shape);
        Values bytes(static_cast<std::size_t>(n * hw * 3));
        for (double& b : bytes) b = static_cast<double>(rng()() % 256);
        const Tensor src = device_with({n, h, w, 3}, DType::u8, bytes);
        const Tensor dst = poisoned({n, 3, h, w}, d, layout);
        cuda().normalize_image(dst, src, norm);
        Values want(bytes.size());
        for (std::int64_t i = 0; i < n; ++i) {
          for (std::int64_t c = 0; c < 3; ++c) {
            for (std::int64_t j = 0; j < hw; ++j) {
              const double v = bytes[static_cast<std::size_t>((i * hw + j) * 3 + c)];
              const double y = (v / 255.0 - static_cast<double>(norm.mean[c])) / static_cast<double>(norm.std[c]);
              const std::int64_t m = layout == Layout::nhwc ? (i * hw + j) * 3 + c : (i * 3 + c) * hw + j;
              want[static_cast<std::size_t>(m)] = y;
            }
          }
        }
        expect_close("normalize_image", d, what, download(dst), want, tolerance(d));
      }
    }
  }
}

// ---- errors -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(host_tensors_and_layout_mixes_are_refused_by_name) {
  const Tensor host = kiln::host_tensor({4}, DType::f32);
  const Tensor dev = poisoned({4}, DType::f32);
  try {
    cuda().activation_forward(dev, host, Activation::relu);
    BOOST_FAIL("expected a BackendError");
  } catch (const kiln::BackendError& e) {
    BOOST_TEST(std::string(e.what()).find("cuda backend, activation_forward: x f32(4) is in host memory") != std::string::npos,
               e.what());
  }
  const Tensor a = poisoned({2, 3, 4, 5}, DType::f16), b = poisoned({2, 3, 4, 5}, DType::f16, Layout::nhwc);
  BOOST_CHECK_THROW(cuda().add(a, a, b), kiln::BackendError);
  BOOST_TEST(cuda().supports(kiln::Op::dropout_forward, DType::bf16));
  BOOST_TEST(cuda().supports(kiln::Op::adam_update, DType::f32));
  BOOST_TEST(!cuda().supports(kiln::Op::adam_update, DType::f16));
}

int main(int argc, char** argv) {
  if (const int skip = kiln::test::skip_without_cuda_device("the cuda kernel test")) return skip;
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
