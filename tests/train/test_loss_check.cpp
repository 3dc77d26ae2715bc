// The loss check with several ranks: the mark each rank adds to one gradient before the
// all-reduce (LossMark) and the decision it lets every rank make alike (stop_if_loss_nonfinite).
// Ranks are played by separate tensors on the cpu backend; "the all-reduce" is their sum.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/loss_guard.hpp"
#include "kiln/train/loss_mark.hpp"
#include "train_fixture.hpp"

namespace {

using kiln::test::cpu;
using kiln::test::device_f32;
using kiln::test::read;

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

/// One rank: its gradient element (the carrier) and its running loss sum, marked as the trainer does.
kiln::Tensor marked_carrier(double gradient, double loss_sum) {
  const kiln::Tensor carrier = device_f32({1}, {gradient});
  auto mark = kiln::train::LossMark::make(cpu(), carrier);
  BOOST_TEST_REQUIRE(mark != nullptr);
  mark->add(device_f32({1}, {loss_sum}));
  return carrier;
}

/// The all-reduce of the ranks' carriers, and whether a mark reads NaN in the sum.
bool sum_reads_nan(const std::vector<kiln::Tensor>& carriers) {
  const kiln::Tensor sum = device_f32({1}, {0.0});
  for (const kiln::Tensor& c : carriers) cpu().add(sum, sum, c);
  return kiln::train::LossMark::make(cpu(), sum)->nan_after_sum();
}

/// A communicator whose all-reduce adds `other_ranks` to the first f64 element (the flags of
/// the ranks not played here) and counts its calls.
class FlagComm final : public kiln::Communicator {
 public:
  explicit FlagComm(double other_ranks) : other_ranks_(other_ranks) {}
  int all_reduces = 0;

  std::string_view name() const override { return "flags"; }
  void connect(const kiln::CommContext&) override {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool accepts(kiln::MemoryKind) const override { return true; }
  std::string describe() const override { return "flag fake"; }
  std::unique_ptr<kiln::Work> all_reduce(const kiln::Tensor& t, kiln::ReduceOp) override {
    ++all_reduces;
    t.data_as<double>()[0] += other_ranks_;
    return std::make_unique<Done>();
  }
  std::unique_ptr<kiln::Work> broadcast(const kiln::Tensor&, int) override {
    throw kiln::CommError("FlagComm: no broadcast in the loss check");
  }
  std::unique_ptr<kiln::Work> all_gather(const kiln::Tensor&, const kiln::Tensor&) override {
    throw kiln::CommError("FlagComm: no all_gather in the loss check");
  }
  void barrier() override {}
  void abort() noexcept override {}

 private:
  struct Done final : kiln::Work {
    void wait() override {}
  };
  double other_ranks_;
};

const kiln::train::LossStepPlace kPlace{0, 2, 6, 10, 6, 0.1};

/// The NumericError of a check, or "" when it passed.
std::string check_error(FlagComm& comm, double local_loss_sum, bool every_rank_finite) {
  try {
    kiln::train::stop_if_loss_nonfinite(cpu(), comm, 2, local_loss_sum, every_rank_finite, kPlace);
  } catch (const kiln::NumericError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loss_check)

BOOST_AUTO_TEST_CASE(a_finite_loss_leaves_the_gradient_as_it_was) {
  for (const double g : {1.5, -2.25, 0.0, std::ldexp(1.0, 127)}) {  // f32-exact values
    const kiln::Tensor c = marked_carrier(g, 1234.5);
    BOOST_TEST(read(c)[0] == g);
  }
  BOOST_TEST(read(marked_carrier(0.5, -1e30))[0] == 0.5);  // any finite sum, even a negative one
}

BOOST_AUTO_TEST_CASE(an_inf_or_nan_loss_makes_the_gradient_nan) {
  for (const double loss : {kInf, -kInf, kNaN}) {
    BOOST_TEST(std::isnan(read(marked_carrier(1.5, loss))[0]), "loss sum " << loss);
  }
}

BOOST_AUTO_TEST_CASE(the_sum_reads_nan_exactly_when_some_rank_s_loss_is_not_finite) {
  BOOST_TEST(!sum_reads_nan({marked_carrier(1.0, 10.0), marked_carrier(-4.0, 12.0)}));
  BOOST_TEST(sum_reads_nan({marked_carrier(1.0, 10.0), marked_carrier(-4.0, kNaN)}));
  BOOST_TEST(sum_reads_nan({marked_carrier(1.0, kInf), marked_carrier(-4.0, 12.0)}));
  BOOST_TEST(sum_reads_nan({marked_carrier(1.0, 10.0), marked_carrier(2.0, 3.0), marked_carrier(3.0, -kInf)}));
  // Gradients alone can be NaN (an fp16 overflow): the sum reads NaN and the ranks then ask.
  BOOST_TEST(sum_reads_nan({marked_carrier(kNaN, 10.0), marked_carrier(1.0, 12.0)}));
  // An inf gradient (an overflow too) is no sign of a bad loss: inf, not NaN.
  BOOST_TEST(!sum_reads_nan({marked_carrier(kInf, 10.0), marked_carrier(1.0, 12.0)}));
}

BOOST_AUTO_TEST_CASE(no_mark_without_an_f32_gradient_element_to_carry_it) {
  BOOST_TEST(kiln::train::LossMark::make(cpu(), kiln::Tensor()) == nullptr);  // every parameter frozen
  BOOST_TEST(kiln::train::LossMark::make(cpu(), device_f32({2}, {1.0, 2.0})) == nullptr);
  const kiln::Tensor bf16 = cpu().allocate({1}, kiln::DType::bf16, kiln::MemoryKind::device);
  BOOST_TEST(kiln::train::LossMark::make(cpu(), bf16) == nullptr);
}

BOOST_AUTO_TEST_CASE(a_clean_mark_needs_no_collective) {
  FlagComm comm(1.0);  // were it asked, the other rank would say its loss is not finite
  BOOST_TEST(check_error(comm, 12.5, true) == "");
  BOOST_TEST(comm.all_reduces == 0);
}

BOOST_AUTO_TEST_CASE(without_a_clean_mark_the_ranks_ask_each_other) {
  FlagComm quiet(0.0);
  BOOST_TEST(check_error(quiet, 12.5, false) == "");  // a NaN gradient, every loss finite: train on
  BOOST_TEST(quiet.all_reduces == 1);

  FlagComm other(1.0);
  const std::string elsewhere = check_error(other, 12.5, false);
  BOOST_TEST(other.all_reduces == 1);
  BOOST_TEST(elsewhere.rfind("epoch 1/2 step 7/10: the training loss is not finite (on another rank); the run "
                             "diverged",
                             0) == 0u,
             elsewhere);

  FlagComm mine(0.0);
  const std::string here = check_error(mine, kInf, false);
  BOOST_TEST(mine.all_reduces == 1);
  BOOST_TEST(here.rfind("epoch 1/2 step 7/10: the training loss is inf (on this rank)", 0) == 0u, here);
}

BOOST_AUTO_TEST_SUITE_END()
