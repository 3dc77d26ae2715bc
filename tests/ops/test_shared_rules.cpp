// The argument rules the cpu backend now takes from the SDK's shared checks (kiln/sdk/op_args.hpp)
// where its own copy used to differ from the cuda backend's, and convert_layout's refusals. Each
// refusal is the shared sentence "cpu backend, <op>: <what>; fix the arguments ...", which the
// cuda backend gives word for word (tests/cuda-kernels checks its side without a GPU).
#include <boost/test/unit_test.hpp>

#include <string>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

std::string refusal(const std::function<void()>& f) { return test::error_text<BackendError>(f); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(shared_rules)

BOOST_AUTO_TEST_CASE(max_pool_backward_needs_the_forward_tensors) {
  // cpu's oneDNN keeps the argmax in the plan, but the contract is one for every backend: cuDNN
  // recomputes the argmax from x and y, so a layer that passed neither would only work on cpu.
  Pool2dDesc d;
  d.n = 1, d.c = 1, d.h = 4, d.w = 4, d.kernel_h = d.kernel_w = 2, d.stride_h = d.stride_w = 2;
  auto plan = cpu().plan_pool2d(d);
  const Tensor x = test::poisoned({1, 1, 4, 4}), y = test::poisoned({1, 1, 2, 2});
  cpu().pool2d_forward(*plan, y, x);
  const std::string msg = refusal([&] { cpu().pool2d_backward(*plan, test::poisoned({1, 1, 4, 4}), y, Tensor(), y); });
  BOOST_TEST(contains(msg, "cpu backend, pool2d_backward: max pool f32 (1, 1, 4, 4) kernel 2x2 stride 2x2 pad 0x0: "
                           "x and y of the forward are required"),
             msg);
}

BOOST_AUTO_TEST_CASE(conv_weights_are_oihw_row_major) {
  Conv2dDesc d;
  d.n = 1, d.c = 2, d.h = 5, d.w = 5, d.k = 3, d.r = d.s = 3;
  auto plan = cpu().plan_conv2d(d);
  const Tensor w = test::poisoned({3, 2, 3, 3}).with_layout(Layout::nhwc);
  const std::string msg =
      refusal([&] { cpu().conv2d_forward(*plan, test::poisoned({1, 3, 3, 3}), test::poisoned({1, 2, 5, 5}), w); });
  BOOST_TEST(contains(msg, "cpu backend, conv2d_forward: w f32(3, 2, 3, 3) nhwc is channels-last"), msg);
}

BOOST_AUTO_TEST_CASE(empty_planes_are_refused_in_every_layout) {
  const Tensor x = test::poisoned({2, 4, 0, 3}).with_layout(Layout::nhwc);
  const std::string msg = refusal([&] { cpu().global_avgpool_forward(test::poisoned({2, 4}), x); });
  BOOST_TEST(contains(msg, "cpu backend, global_avgpool_forward: x f32(2, 4, 0, 3) nhwc has an empty spatial extent"), msg);
}

BOOST_AUTO_TEST_CASE(convert_layout_refusals) {
  const Tensor src = test::poisoned({2, 3, 4, 5});
  const Tensor nhwc = test::poisoned({2, 3, 4, 5}).with_layout(Layout::nhwc);
  BOOST_TEST(contains(refusal([&] { cpu().convert_layout(test::poisoned({2, 3, 4, 5}, DType::bf16), src); }),
                      "cpu backend, convert_layout: dst is bf16(2, 3, 4, 5) but must be f32"));
  BOOST_TEST(contains(refusal([&] { cpu().convert_layout(test::poisoned({2, 3, 5, 4}).with_layout(Layout::nhwc), src); }),
                      "dst is f32(2, 3, 5, 4) nhwc but must have the shape of src f32(2, 3, 4, 5)"));
  BOOST_TEST(contains(refusal([&] { cpu().convert_layout(src.with_layout(Layout::nhwc), src); }),
                      "are the same memory"));
  BOOST_TEST(contains(refusal([&] { cpu().convert_layout(test::poisoned({6, 20}), test::poisoned({6, 20})); }),
                      "src is f32(6, 20) but must be 4-D"));
  cpu().convert_layout(nhwc, src);  // the accepted case, for contrast
}

BOOST_AUTO_TEST_SUITE_END()
