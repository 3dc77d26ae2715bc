// The cuda backend's synchronised batch-norm ops (batchnorm_stats, batchnorm_backward_reduce,
// batchnorm_backward_elemt) on a GPU against the cpu backend's own loops
// (plugins/backend-cpu/ops/batchnorm_sync_loops.cpp, compiled into this test: the GPU machine
// gets no cpu plugin or oneDNN, and these loops need neither), on the same random inputs in f32,
// f16 and bf16, NCHW and nhwc. Shapes cover one value per channel, fewer channels than a tile
// of 32, channels that need many chunks in each layout (the two-pass grid reduction), many
// channels of few values, and data far from zero (the variance's two passes). Outputs are
// poisoned (all-ones bytes: NaN) first. Both sides sum in f64 from the same stored values, so
// the statistics and sums agree to 1e-6 relative in every dtype; dx to 1e-6 in f32 and to one
// rounding of the output (1e-2) in f16/bf16. Each statistic is also computed twice and must be
// bit-identical (no atomics: the reduction order is fixed).
// Each comparison prints "KERNEL-CHECK | op | dtype | case | rel error | ok" for gpu-check.sh.
// Labelled `gpu`: without a device main() exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE cuda_batchnorm_sync_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <kiln/backend.hpp>
#include <kiln/config/config.hpp>
#include <kiln/errors.hpp>
#include <kiln/plugin/registry.hpp>
#include <kiln/sdk/half.hpp>

#include "../gpu/cuda_device_skip.hpp"

#include "ops/batchnorm_loops.hpp"  // the cpu backend's loops (plugins/backend-cpu)

namespace {

using kiln::BatchNormDesc;
using kiln::DType;
using kiln::Layout;
using kiln::MemoryKind;
using kiln::Shape;
using kiln::Tensor;
using Values = std::vector<double>;

// ---- the cuda plugin (never destroyed: objects made by plugin code must not outlive it) -------

kiln::Backend& cuda() {
  static std::shared_ptr<kiln::Backend>* made = [] {
    auto* reg = new kiln::plugin::Registry({KILN_TEST_PLUGIN_DIR});
    reg->scan();
    const auto& info = reg->require(KILN_KIND_BACKEND, "cuda", "backend");
    auto cfg = kiln::config::Config::parse("[backend]\n", "test.toml", {});
    auto* params = new kiln::ParamMap(cfg.validate("backend", info.params));
    kiln::PluginArgs args;
    args.params = params;
    return new std::shared_ptr<kiln::Backend>(reg->create_backend(info, args));
  }();
  return **made;
}

// ---- host tensors in memory order ----------------------------------------------------------------

Tensor host(const Shape& shape, DType d, Layout layout = Layout::row_major) {
  Tensor t = kiln::host_tensor(shape, d);
  return layout == Layout::row_major ? t : t.with_layout(layout);
}

void store(const Tensor& t, std::int64_t i, double v) {
  const float f = static_cast<float>(v);
  switch (t.dtype()) {
    case DType::f32: t.data_as<float>()[i] = f; return;
    case DType::f16: t.data_as<std::uint16_t>()[i] = kiln::sdk::f32_to_f16(f); return;
    case DType::bf16: t.data_as<std::uint16_t>()[i] = kiln::sdk::f32_to_bf16(f); return;
    default: throw std::logic_error("test store: not a float dtype");
  }
}

double load(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data_as<float>()[i];
    case DType::f16: return kiln::sdk::f16_to_f32(t.data_as<std::uint16_t>()[i]);
    case DType::bf16: return kiln::sdk::bf16_to_f32(t.data_as<std::uint16_t>()[i]);
    default: throw std::logic_error("test load: not a float dtype");
  }
}

std::mt19937_64& rng() {
  static std::mt19937_64 r(20261201);
  return r;
}

Tensor uniform_host(const Shape& shape, DType d, double lo, double hi, Layout layout = Layout::row_major) {
  Tensor t = host(shape, d, layout);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) store(t, i, dist(rng()));
  return t;
}

Tensor on_device(const Tensor& h) {
  Tensor t = cuda().allocate(h.shape(), h.dtype(), MemoryKind::device);
  if (h.layout() != Layout::row_major) t = t.with_layout(h.layout());
  cuda().copy(h, t);
  cuda().synchronize();  // h may go as soon as this returns
  return t;
}

/// A device tensor of all-ones bytes (NaN in every float type).
Tensor poisoned(const Shape& shape, DType d, Layout layout = Layout::row_major) {
  Tensor h = host(shape, d, layout);
  std::memset(h.data(), 0xff, h.bytes());
  return on_device(h);
}

/// Memory-order values (the host copy has completed when copy() returns).
Values fetch(const Tensor& t) {
  Tensor h = host(t.shape(), t.dtype(), t.layout());
  cuda().copy(t, h);
  Values v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = load(h, i);
  return v;
}

Values values_of(const Tensor& h) {
  Values v(static_cast<std::size_t>(h.numel()));
  for (std::int64_t i = 0; i < h.numel(); ++i) v[static_cast<std::size_t>(i)] = load(h, i);
  return v;
}

// ---- comparison -------------------------------------------------------------------------------

double rel_error(const Values& got, const Values& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

void expect_close(const std::string& op, DType d, const std::string& what, const Values& got, const Values& want,
                  double tol) {
  const double err = rel_error(got, want);
  std::printf("KERNEL-CHECK | %-28s | %-4s | %-36s | %.3e | %s\n", op.c_str(),
              std::string(kiln::dtype_name(d)).c_str(), what.c_str(), err, err <= tol ? "ok" : "FAIL");
  BOOST_TEST(err <= tol, op << " " << kiln::dtype_name(d) << " " << what << ": relative error " << err << " exceeds "
                            << tol);
}

void expect_identical(const std::string& op, DType d, const std::string& what, const Values& first,
                      const Values& second) {
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < first.size(); ++i) differ += std::memcmp(&first[i], &second[i], sizeof(double)) != 0;
  std::printf("KERNEL-CHECK | %-28s | %-4s | %-36s | %lld differ | %s\n", op.c_str(),
              std::string(kiln::dtype_name(d)).c_str(), (what + " rerun").c_str(), static_cast<long long>(differ),
              differ == 0 ? "ok" : "FAIL");
  BOOST_TEST(differ == 0, op << " " << what << ": a second run gave " << differ << " different values");
}

/// Per-channel sums agree to f64 summation order then one f32 rounding, in every dtype.
constexpr double kSumTolerance = 1e-6;
double dx_tolerance(DType d) { return d == DType::f32 ? 1e-6 : 1e-2; }

struct Case {
  std::int64_t n, c, h, w;
  double lo, hi;  ///< range of x
};

const Case kCases[] = {
    {1, 3, 1, 1, -2, 3},         // one value per channel (variance 0)
    {4, 5, 3, 4, -2, 3},         // the conformance shape; fewer channels than a tile
    {16, 8, 33, 31, -2, 3},      // several chunks per channel in both layouts, odd H*W
    {8, 64, 56, 56, -1, 1},      // ResNet's first stage
    {4, 200, 7, 7, -1, 1},       // many channels of few values, a partial tile of 32
    {32, 3, 16, 16, 100, 101},   // far from zero: the two-pass variance
};

std::string case_name(const Case& k, Layout layout) {
  return std::string(layout == Layout::nhwc ? "nhwc " : "nchw ") + std::to_string(k.n) + "x" + std::to_string(k.c) +
         "x" + std::to_string(k.h) + "x" + std::to_string(k.w) + (k.lo >= 100 ? " offset" : "");
}

}  // namespace

BOOST_AUTO_TEST_CASE(sync_batchnorm_ops_match_the_cpu_backends_loops) {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    for (const Case& k : kCases) {
      for (Layout layout : {Layout::row_major, Layout::nhwc}) {
        const std::string what = case_name(k, layout);
        BatchNormDesc desc;
        desc.n = k.n, desc.c = k.c, desc.h = k.h, desc.w = k.w;
        desc.dtype = d;
        const Shape image{k.n, k.c, k.h, k.w}, per_channel{k.c};
        const auto plan = cuda().plan_batchnorm(desc);

        // batchnorm_stats
        const Tensor xh = uniform_host(image, d, k.lo, k.hi, layout);
        const Tensor x = on_device(xh);
        Tensor want_mean = host(per_channel, DType::f32), want_var = host(per_channel, DType::f32);
        kiln::cpu::bn_sync_stats(desc, want_mean.data_as<float>(), want_var.data_as<float>(), xh);
        Tensor mean = poisoned(per_channel, DType::f32), var = poisoned(per_channel, DType::f32);
        cuda().batchnorm_stats(*plan, mean, var, x);
        const Values got_mean = fetch(mean), got_var = fetch(var);
        expect_close("batchnorm_stats mean", d, what, got_mean, values_of(want_mean), kSumTolerance);
        expect_close("batchnorm_stats var", d, what, got_var, values_of(want_var), kSumTolerance);
        cuda().batchnorm_stats(*plan, mean, var, x);
        expect_identical("batchnorm_stats", d, what + " mean", got_mean, fetch(mean));
        expect_identical("batchnorm_stats", d, what + " var", got_var, fetch(var));

        // batchnorm_backward_reduce, with statistics of the right size (as the sync layer passes)
        const Tensor dyh = uniform_host(image, d, -1, 1, layout);
        const Tensor dy = on_device(dyh);
        Tensor invsth = host(per_channel, DType::f32);
        for (std::int64_t c = 0; c < k.c; ++c) {
          invsth.data_as<float>()[c] = static_cast<float>(1.0 / std::sqrt(double{want_var.data_as<float>()[c]} + 1e-5));
        }
        const Tensor save_mean = on_device(want_mean), save_invstd = on_device(invsth);
        Tensor want_s1 = host(per_channel, DType::f32), want_s2 = host(per_channel, DType::f32);
        kiln::cpu::bn_sync_backward_reduce(desc, want_s1.data_as<float>(), want_s2.data_as<float>(), dyh, xh,
                                           want_mean.data_as<float>(), invsth.data_as<float>());
        Tensor s1 = poisoned(per_channel, DType::f32), s2 = poisoned(per_channel, DType::f32);
        cuda().batchnorm_backward_reduce(*plan, s1, s2, dy, x, save_mean, save_invstd);
        const Values got_s1 = fetch(s1), got_s2 = fetch(s2);
        expect_close("batchnorm_backward_reduce dy", d, what, got_s1, values_of(want_s1), kSumTolerance);
        expect_close("batchnorm_backward_reduce dy*xhat", d, what, got_s2, values_of(want_s2), kSumTolerance);
        cuda().batchnorm_backward_reduce(*plan, s1, s2, dy, x, save_mean, save_invstd);
        expect_identical("batchnorm_backward_reduce", d, what + " sums", got_s2, fetch(s2));

        // batchnorm_backward_elemt, with sums and a count as if a second rank held as many values
        const std::int64_t count = 2 * k.n * k.h * k.w;
        const Tensor gammah = uniform_host(per_channel, DType::f32, 0.5, 1.5);
        Tensor sum_dyh = host(per_channel, DType::f32), sum_dy_xhath = host(per_channel, DType::f32);
        for (std::int64_t c = 0; c < k.c; ++c) {
          sum_dyh.data_as<float>()[c] = 2.0f * want_s1.data_as<float>()[c] + 0.25f;
          sum_dy_xhath.data_as<float>()[c] = 2.0f * want_s2.data_as<float>()[c] - 0.5f;
        }
        Tensor want_dx = host(image, d, layout);
        kiln::cpu::bn_sync_backward_elemt(desc, want_dx, dyh, xh, gammah.data_as<float>(), want_mean.data_as<float>(),
                                          invsth.data_as<float>(), sum_dyh.data_as<float>(),
                                          sum_dy_xhath.data_as<float>(), count);
        const Tensor dx = poisoned(image, d, layout);
        cuda().batchnorm_backward_elemt(*plan, dx, dy, x, on_device(gammah), save_mean, save_invstd,
                                        on_device(sum_dyh), on_device(sum_dy_xhath), count);
        expect_close("batchnorm_backward_elemt", d, what, fetch(dx), values_of(want_dx), dx_tolerance(d));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_plan_from_elsewhere_and_a_short_count_are_refused_by_name) {
  BatchNormDesc desc;
  desc.n = 2, desc.c = 3, desc.h = 2, desc.w = 2;
  const auto plan = cuda().plan_batchnorm(desc);
  const Tensor x = poisoned({2, 3, 2, 2}, DType::f32), s = poisoned({3}, DType::f32);
  kiln::Pool2dDesc pool;
  pool.n = 2, pool.c = 3, pool.h = 2, pool.w = 2, pool.kernel_h = pool.kernel_w = 2, pool.stride_h = pool.stride_w = 2;
  const auto other = cuda().plan_pool2d(pool);
  try {
    cuda().batchnorm_stats(*other, s, s, x);
    BOOST_FAIL("expected a BackendError");
  } catch (const kiln::BackendError& e) {
    BOOST_TEST(std::string(e.what()).find("cuda backend, batchnorm_stats: the plan passed was not made by the cuda "
                                          "backend's plan_batchnorm") != std::string::npos,
               e.what());
  }
  BOOST_CHECK_THROW(cuda().batchnorm_backward_elemt(*plan, x, x, x, s, s, s, s, s, 7), kiln::BackendError);
}

int main(int argc, char** argv) {
  if (const int skip = kiln::test::skip_without_cuda_device("the sync batch-norm GPU test")) return skip;
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
