// [backend] conv_filter_reuse on a real GPU (plugins/backend-cuda/dnn/filter_copy.hpp): a few
// training steps of one channels-last convolution (f32 master weights cast to the compute copy,
// forward, backward-filter into the f32 gradient, backward-data, SGD) give the same results with
// the backward-data call reading the forward's KRSC filter copy as with converting in every call.
// The weights change by far more per step than the tolerance, so a stale copy would show; the
// backend's counter shows the copy was read.
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include "gpu_fixture.hpp"

using namespace kiln;
using namespace kiln::cuda_test;

namespace {

struct Steps {
  std::vector<Values> y, dx, master;
};

Steps train(Backend& b, const Conv2dDesc& d, const Values& x, const Values& dy, const Values& w0) {
  const Shape xs{d.n, d.c, d.h, d.w}, ys{d.n, d.k, d.out_h(), d.out_w()}, ws{d.k, d.c, d.r, d.s};
  // Inputs are uploaded through gpu() and read by `b`, which may run on other streams.
  const Tensor x_t = upload(x, xs, d.dtype, Layout::nhwc), dy_t = upload(dy, ys, d.dtype, Layout::nhwc);
  const Tensor master = upload(w0, ws, DType::f32);
  gpu().synchronize();
  const Tensor compute = b.allocate(ws, d.dtype, MemoryKind::device);
  const Tensor grad = b.allocate(ws, DType::f32, MemoryKind::device);
  const Tensor y = b.allocate(ys, d.dtype, MemoryKind::device).with_layout(Layout::nhwc);
  const Tensor dx = b.allocate(xs, d.dtype, MemoryKind::device).with_layout(Layout::nhwc);
  auto plan = b.plan_conv2d(d);
  SgdStep sgd;
  sgd.lr = 0.5f;
  Steps out;
  for (int step = 0; step < 3; ++step) {
    b.cast(compute, master);  // the precision policy's before_forward
    b.conv2d_forward(*plan, y, x_t, compute);
    b.fill(grad, 0.0);
    b.conv2d_backward_filter(*plan, grad, dy_t, x_t, Accumulate::yes);
    b.conv2d_backward_data(*plan, dx, dy_t, compute);
    b.sgd_update(master, Tensor(), grad, sgd);
    b.synchronize();
    out.y.push_back(download(y));
    out.dx.push_back(download(dx));
    out.master.push_back(download(master));
  }
  return out;
}

double reused(const Backend& b) { return b.counters().at("conv_filter_copies_reused"); }

}  // namespace

BOOST_AUTO_TEST_CASE(conv_filter_reuse_trains_like_converting_in_every_call) {
  auto off = make_gpu_backend("conv_filter_reuse = false");
  for (const DType dt : {DType::bf16, DType::f16}) {
    BOOST_TEST_CONTEXT(dtype_name(dt)) {
      std::mt19937 rng(19);
      Conv2dDesc d;
      d.n = 4, d.c = 16, d.h = 8, d.w = 8, d.k = 32, d.r = 3, d.s = 3, d.pad_h = 1, d.pad_w = 1;
      d.dtype = dt;
      const Values x = random_values(static_cast<std::size_t>(d.n * d.c * d.h * d.w), rng, dt);
      const Values dy = random_values(static_cast<std::size_t>(d.n * d.k * d.out_h() * d.out_w()), rng, dt);
      const Values w0 = random_values(static_cast<std::size_t>(d.k * d.c * d.r * d.s), rng, DType::f32, -0.5, 0.5);

      const double reused_before = reused(gpu());
      const Steps with = train(gpu(), d, x, dy, w0);
      const Steps without = train(*off, d, x, dy, w0);
      BOOST_TEST(reused(gpu()) - reused_before == 3.0);  // every backward-data call read the copy
      BOOST_TEST(reused(*off) == 0.0);

      for (std::size_t s = 0; s < with.y.size(); ++s) {
        BOOST_TEST_CONTEXT("step " << s) {
          // The forward reads the same converted bits either way (same algorithm: the choice is
          // cached process-wide; cuDNN's forward algorithms are deterministic), so y is
          // identical. dx and the weights leave room for a backward algorithm that sums with
          // atomics (a changed last bit in a few f16/bf16 elements), far below what a stale filter
          // would cause: dx computed with the previous step's weights, checked to differ by more
          // than 10%.
          BOOST_TEST(with.y[s] == without.y[s]);
          BOOST_TEST(relative_error(with.dx[s], without.dx[s]) <= 1e-2);
          BOOST_TEST(relative_error(with.master[s], without.master[s]) <= 1e-5);
          if (s > 0) BOOST_TEST(relative_error(with.dx[s], with.dx[s - 1]) > 0.1);
        }
      }
    }
  }
}
