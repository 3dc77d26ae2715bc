// The op table (KILN_OPS, kiln/op_table.hpp) against everything that must follow it: every op has
// a distinct name, at least one conformance case, and a base-class default that refuses it with
// the contract's words. (Each in-tree backend's support table is checked at compile time by
// sdk::lists_every_op_once; main.cpp's every_op_supported_in_f32 checks the backend under test.)
// Adding an op to KILN_OPS without these fails here, naming the op.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "cli/backend_suite/suite.hpp"
#include "kiln/errors.hpp"

namespace kiln::conformance {
namespace {

/// A backend that implements nothing but the pure virtuals, so every op runs Backend's default.
class BareBackend final : public Backend {
 public:
  std::string_view name() const override { return "bare"; }
  DeviceInfo device() const override { return {}; }
  bool supports(Op, DType) const override { return false; }
  Tensor allocate(const Shape& shape, DType dtype, MemoryKind) override { return host_tensor(shape, dtype); }
  void copy(const Tensor&, const Tensor&) override {}
  void fill(const Tensor&, double) override {}
  Tensor to_device(const Tensor& host) override { return host; }
  void synchronize() override {}
  std::shared_ptr<Event> record_event(StreamKind) override { return nullptr; }
  void wait_event(StreamKind, const Event&) override {}
  void* native_stream(StreamKind) override { return nullptr; }
};

class NoPlan final : public OpPlan {};

/// One call per op of its Backend method with f64 operands (a dtype no backend offers), so the
/// default's message names the op and f64.
std::map<Op, std::function<void(Backend&)>> default_calls() {
  const Tensor t = host_tensor({1}, DType::f64);
  static NoPlan plan;
  return {
      {Op::matmul, [t](Backend& b) { b.matmul(t, t, Transpose::no, t, Transpose::no, 1, 0, t); }},
      {Op::bias_grad, [t](Backend& b) { b.bias_grad(t, t, Accumulate::no); }},
      {Op::activation_forward, [t](Backend& b) { b.activation_forward(t, t, Activation::relu); }},
      {Op::activation_backward, [t](Backend& b) { b.activation_backward(t, t, t, t, Activation::relu, Accumulate::no); }},
      {Op::add_relu_forward, [t](Backend& b) { b.add_relu_forward(t, t, t); }},
      {Op::dropout_forward, [t](Backend& b) { b.dropout_forward(t, t, t, 0.5f, 1); }},
      {Op::dropout_backward, [t](Backend& b) { b.dropout_backward(t, t, t, 0.5f); }},
      {Op::softmax_xent_forward, [t](Backend& b) { b.softmax_xent_forward(t, t, t, t, 0); }},
      {Op::softmax_xent_backward, [t](Backend& b) { b.softmax_xent_backward(t, t, t, 0, 1); }},
      {Op::add, [t](Backend& b) { b.add(t, t, t); }},
      {Op::cast, [t](Backend& b) { b.cast(t, t); }},
      {Op::scale, [t](Backend& b) { b.scale(t, 2); }},
      {Op::check_finite, [t](Backend& b) { b.check_finite(t, t); }},
      {Op::sgd_update, [t](Backend& b) { b.sgd_update(t, t, t, SgdStep{}); }},
      {Op::adam_update, [t](Backend& b) { b.adam_update(t, t, t, t, AdamStep{}); }},
      {Op::conv2d_forward, [t](Backend& b) { b.conv2d_forward(plan, t, t, t); }},
      {Op::conv2d_backward_data, [t](Backend& b) { b.conv2d_backward_data(plan, t, t, t); }},
      {Op::conv2d_backward_filter, [t](Backend& b) { b.conv2d_backward_filter(plan, t, t, t, Accumulate::no); }},
      {Op::batchnorm_train_forward, [t](Backend& b) { b.batchnorm_train_forward(plan, t, t, t, t, t, t, t, t); }},
      {Op::batchnorm_infer_forward, [t](Backend& b) { b.batchnorm_infer_forward(plan, t, t, t, t, t, t); }},
      {Op::batchnorm_backward, [t](Backend& b) { b.batchnorm_backward(plan, t, t, t, t, t, t, t, t); }},
      {Op::pool2d_forward, [t](Backend& b) { b.pool2d_forward(plan, t, t); }},
      {Op::pool2d_backward, [t](Backend& b) { b.pool2d_backward(plan, t, t, t, t); }},
      {Op::global_avgpool_forward, [t](Backend& b) { b.global_avgpool_forward(t, t); }},
      {Op::global_avgpool_backward, [t](Backend& b) { b.global_avgpool_backward(t, t); }},
      {Op::normalize_image, [t](Backend& b) { b.normalize_image(t, t, ImageNormalize{}); }},
      {Op::convert_layout, [t](Backend& b) { b.convert_layout(t, t); }},
      {Op::batchnorm_stats, [t](Backend& b) { b.batchnorm_stats(plan, t, t, t); }},
      {Op::batchnorm_backward_reduce, [t](Backend& b) { b.batchnorm_backward_reduce(plan, t, t, t, t, t, t); }},
      {Op::batchnorm_backward_elemt, [t](Backend& b) { b.batchnorm_backward_elemt(plan, t, t, t, t, t, t, t, t, 2); }},
      {Op::top_k_hits, [t](Backend& b) { b.top_k_hits(t, t, t, 5); }},
      {Op::lerp, [t](Backend& b) { b.lerp(t, t, 0.5f); }},
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(op_table)

BOOST_AUTO_TEST_CASE(every_op_has_a_distinct_name) {
  std::set<std::string> seen;
  for (const Op op : kAllOps) {
    const std::string name(op_name(op));
    BOOST_TEST(name != "unknown");
    BOOST_TEST(seen.insert(name).second, "op name '" << name << "' is used twice");
  }
  BOOST_TEST(seen.size() == kOpCount);
  BOOST_TEST(op_name(Op::conv2d_backward_filter) == "conv2d_backward_filter");
  BOOST_TEST(op_name(static_cast<Op>(kOpCount)) == "unknown");
}

BOOST_AUTO_TEST_CASE(every_op_has_a_conformance_case) {
  const std::vector<Op> covered = covered_ops();
  for (const Op op : kAllOps) {
    BOOST_TEST((std::find(covered.begin(), covered.end(), op) != covered.end()),
               "op " << op_name(op) << " has no conformance case; add one in a core/cli/backend_suite/cases_*.cpp");
  }
}

BOOST_AUTO_TEST_CASE(every_op_is_refused_by_default_with_one_sentence) {
  BareBackend bare;
  const auto calls = default_calls();
  for (const Op op : kAllOps) {
    const auto it = calls.find(op);
    BOOST_TEST_REQUIRE((it != calls.end()),
                       "op " << op_name(op) << " has no default-refusal call here; add its Backend method");
    std::string message = "<no exception thrown>";
    try {
      it->second(bare);
    } catch (const UnsupportedError& e) {
      message = e.what();
    }
    const std::string want = "backend 'bare' does not implement " + std::string(op_name(op)) +
                             " for f64; choose a backend that does (`kiln plugins list` shows them) or "
                             "another precision";
    BOOST_TEST(message == want);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::conformance
