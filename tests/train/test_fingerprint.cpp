// FingerprintCommunicator: a fake two-rank world whose all_gather reports what "rank 1" claims,
// so agreement, disagreement and the message text can be checked in one process.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "kiln/communicator.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/fingerprint_communicator.hpp"
#include "train_fixture.hpp"

namespace {

class DoneWork final : public kiln::Work {
 public:
  void wait() override {}
};

/// Rank 0 of a pretend world of 2: all_gather copies this rank's fingerprint and lets the test
/// decide what rank 1 sent (by editing a copy of it).
class TwoRankFake final : public kiln::Communicator {
 public:
  std::function<void(std::int64_t* peer)> tamper = [](std::int64_t*) {};
  int forwarded = 0;

  std::string_view name() const override { return "fake"; }
  void connect(const kiln::CommContext&) override {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool accepts(kiln::MemoryKind) const override { return true; }
  std::string describe() const override { return "fake"; }
  std::unique_ptr<kiln::Work> all_reduce(const kiln::Tensor&, kiln::ReduceOp) override {
    ++forwarded;
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<kiln::Work> broadcast(const kiln::Tensor&, int) override {
    ++forwarded;
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<kiln::Work> all_gather(const kiln::Tensor& out, const kiln::Tensor& in) override {
    auto* o = out.data_as<std::int64_t>();
    std::memcpy(o, in.data(), in.bytes());
    std::memcpy(o + in.numel(), in.data(), in.bytes());
    tamper(o + in.numel());
    return std::make_unique<DoneWork>();
  }
  void barrier() override { ++forwarded; }
  void abort() noexcept override {}
};

struct Fixture {
  std::shared_ptr<TwoRankFake> fake = std::make_shared<TwoRankFake>();
  kiln::train::FingerprintCommunicator comm{fake};
  Fixture() {
    kiln::CommContext ctx;
    ctx.backend = &kiln::test::cpu();
    comm.connect(ctx);
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::CommError& e) {
    return e.what();
  }
  return "";
}

BOOST_AUTO_TEST_SUITE(fingerprint)

BOOST_AUTO_TEST_CASE(agreeing_ranks_pass_every_collective_through) {
  Fixture fx;
  kiln::Tensor t = kiln::host_tensor({1024}, kiln::DType::f32);
  fx.comm.all_reduce(t, kiln::ReduceOp::sum)->wait();
  fx.comm.broadcast(t, 0)->wait();
  fx.comm.barrier();
  BOOST_TEST(fx.fake->forwarded == 3);
}

BOOST_AUTO_TEST_CASE(a_different_op_is_reported_with_both_sides) {
  Fixture fx;
  fx.fake->tamper = [](std::int64_t* peer) {
    peer[1] = 2;  // broadcast
    peer[4] = 0;  // root 0
  };
  kiln::Tensor t = kiln::host_tensor({1024}, kiln::DType::f32);
  const std::string msg = error_of([&] { fx.comm.all_reduce(t, kiln::ReduceOp::sum); });
  BOOST_TEST(msg == "collective #0 differs across ranks: rank 0 runs all_reduce(sum) f32 x 1024 (its #0), rank 1 "
                    "runs broadcast(root 0) f32 x 1024 (its #0); every rank must issue the same collectives in "
                    "the same order");
  BOOST_TEST(fx.fake->forwarded == 0, "a mismatched collective must not reach the real communicator");
}

BOOST_AUTO_TEST_CASE(a_different_count_or_dtype_is_reported) {
  Fixture fx;
  kiln::Tensor t = kiln::host_tensor({8}, kiln::DType::f32);
  fx.comm.all_reduce(t, kiln::ReduceOp::sum)->wait();  // #0 agrees
  fx.fake->tamper = [](std::int64_t* peer) {
    peer[2] = static_cast<std::int64_t>(kiln::DType::f16);
    peer[3] = 16;
  };
  const std::string msg = error_of([&] { fx.comm.all_reduce(t, kiln::ReduceOp::sum); });
  BOOST_TEST(msg.find("collective #1 differs across ranks: rank 0 runs all_reduce(sum) f32 x 8") == 0u, msg);
  BOOST_TEST(msg.find("rank 1 runs all_reduce(sum) f16 x 16") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
