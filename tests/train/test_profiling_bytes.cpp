// ProfilingBackend's byte counts (the GB/s column of `kiln train --profile`, docs/profiling.md):
// each distinct buffer an op reads counts once, each buffer it writes once, and a buffer both
// read and written (in place, Accumulate::yes, optimizer state) counts twice. The inner backend
// here only allocates and swallows the ops: the counts come from the arguments alone.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kiln/backend.hpp"
#include "kiln/profile/profiling_backend.hpp"
#include "../support/alloc_only_backend.hpp"
#include "../support/forwarding_backend.hpp"

namespace {

using namespace kiln;

/// Takes every op and does nothing with it, counting how many reached it.
class SwallowingBackend final : public test::ForwardingBackend {
 public:
  SwallowingBackend() : ForwardingBackend(std::make_shared<test::AllocOnlyBackend>()) {}
  int ops = 0;

 protected:
  void run_op(std::function<void()>) override { ++ops; }
};

/// One profiled step (no warm-up) around the calls a test makes.
struct Profiled {
  std::shared_ptr<SwallowingBackend> inner = std::make_shared<SwallowingBackend>();
  profile::ProfilingBackend backend{inner, 0};

  Profiled() { backend.step_begin(); }
  Tensor f32(const Shape& shape) { return backend.allocate(shape, DType::f32, MemoryKind::device); }

  /// The bytes charged to one table row ("add f32") so far; fails the test if the row is missing.
  double bytes(const std::string& row) const {
    const auto& ops = backend.profile().ops;
    const auto it = ops.find(row);
    BOOST_TEST_REQUIRE((it != ops.end()), "no profile row '" << row << "'");
    return it->second.bytes;
  }
};

constexpr double kImage = 2 * 3 * 4 * 5 * 4.0;  // bytes of one f32 {2, 3, 4, 5} tensor
const Shape kShape{2, 3, 4, 5};

BOOST_AUTO_TEST_SUITE(profiling_bytes)

BOOST_AUTO_TEST_CASE(add_counts_each_distinct_input_once) {
  Profiled p;
  const Tensor a = p.f32(kShape), b = p.f32(kShape), c = p.f32(kShape);
  p.backend.add(c, a, b);
  BOOST_TEST(p.bytes("add f32") == 3 * kImage);  // a, b read; c written

  // A second handle on a's bytes is the same buffer: a + a reads it once.
  Profiled q;
  const Tensor x = q.f32(kShape), out = q.f32(kShape);
  const Tensor x_again = x.view(0, kShape);
  BOOST_TEST_REQUIRE(x_again.data() == x.data());
  q.backend.add(out, x, x_again);
  BOOST_TEST(q.bytes("add f32") == 2 * kImage);
  BOOST_TEST(q.inner->ops == 1);  // the call reached the inner backend
}

BOOST_AUTO_TEST_CASE(in_place_output_counts_as_read_and_written) {
  Profiled p;
  const Tensor a = p.f32(kShape), b = p.f32(kShape);
  p.backend.add(a, a, b);  // a += b: a and b read, a written
  BOOST_TEST(p.bytes("add f32") == 3 * kImage);
  p.backend.scale(a, 0.5f);
  BOOST_TEST(p.bytes("scale f32") == 2 * kImage);
}

BOOST_AUTO_TEST_CASE(relu_backward_with_x_and_y_aliased) {
  // The residual block's call: x and y are both the forward's output, saved in place.
  Profiled p;
  const Tensor dx = p.f32(kShape), dy = p.f32(kShape), y = p.f32(kShape);
  p.backend.activation_backward(dx, dy, y, y, Activation::relu, Accumulate::no);
  BOOST_TEST(p.bytes("activation_backward f32") == 3 * kImage);  // dy, y read; dx written

  // Accumulating into dx reads it as well.
  p.backend.activation_backward(dx, dy, y, y, Activation::relu, Accumulate::yes);
  BOOST_TEST(p.bytes("activation_backward f32") == 3 * kImage + 4 * kImage);
}

BOOST_AUTO_TEST_CASE(activation_backward_reads_only_the_saved_tensor) {
  // relu derives its gradient from y and gelu from x (the backend contract): the other operand,
  // even when distinct, is not read.
  Profiled p;
  const Tensor dx = p.f32(kShape), dy = p.f32(kShape), x = p.f32(kShape), y = p.f32(kShape);
  p.backend.activation_backward(dx, dy, x, y, Activation::relu, Accumulate::no);
  BOOST_TEST(p.bytes("activation_backward f32") == 3 * kImage);
  p.backend.activation_backward(dx, dy, x, Tensor(), Activation::gelu, Accumulate::no);
  BOOST_TEST(p.bytes("activation_backward f32") == 6 * kImage);
}

BOOST_AUTO_TEST_CASE(matmul_reads_c_only_when_beta_is_nonzero) {
  Profiled p;
  const Tensor a = p.f32({4, 4}), c = p.f32({4, 4});
  constexpr double m = 4 * 4 * 4.0;
  p.backend.matmul(c, a, Transpose::no, a, Transpose::yes, 1.0f, 0.0f, Tensor());  // a * a^T
  BOOST_TEST(p.bytes("matmul f32") == 2 * m);  // a read once, c written
  p.backend.matmul(c, a, Transpose::no, a, Transpose::yes, 1.0f, 1.0f, Tensor());
  BOOST_TEST(p.bytes("matmul f32") == 2 * m + 3 * m);  // and c read
}

BOOST_AUTO_TEST_CASE(optimizer_state_counts_as_read_and_written) {
  Profiled p;
  const Tensor param = p.f32({64}), momentum = p.f32({64}), grad = p.f32({64});
  constexpr double v = 64 * 4.0;
  SgdStep sgd;
  sgd.momentum = 0.9f;
  p.backend.sgd_update(param, momentum, grad, sgd);
  BOOST_TEST(p.bytes("sgd_update f32") == 5 * v);  // param, momentum, grad read; param, momentum written

  const Tensor m = p.f32({64}), var = p.f32({64});
  p.backend.adam_update(param, m, var, grad, AdamStep{});
  BOOST_TEST(p.bytes("adam_update f32") == 7 * v);
}

BOOST_AUTO_TEST_CASE(to_device_on_a_host_backend_moves_nothing) {
  Profiled p;
  const Tensor host = p.backend.allocate(kShape, DType::f32, MemoryKind::host);
  const Tensor on_device = p.backend.to_device(host);  // the alloc-only backend hands host back
  BOOST_TEST_REQUIRE(on_device.data() == host.data());
  BOOST_TEST(p.bytes("to_device f32") == 0.0);
}

BOOST_AUTO_TEST_CASE(outside_a_step_nothing_is_counted) {
  auto inner = std::make_shared<SwallowingBackend>();
  profile::ProfilingBackend backend(inner, 1);  // the first step is warm-up
  backend.step_begin();
  const Tensor a = backend.allocate(kShape, DType::f32, MemoryKind::device);
  backend.add(a, a, a);
  backend.step_end();
  BOOST_TEST(backend.profile().ops.empty());
  BOOST_TEST(inner->ops == 1);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
