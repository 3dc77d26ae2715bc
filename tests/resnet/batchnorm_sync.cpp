// BatchNorm2d's synchronised path (sdk/src/nn/batchnorm2d_sync.cpp) without processes: two
// "ranks" are two threads, each with its own BatchNorm2d over half of a batch, joined by an
// in-process BatchNormSync. Their outputs, input gradients and running statistics must equal
// those of one unsynchronised BatchNorm2d over the whole batch, and their dgamma/dbeta must add
// up to its (the gradient all-reduce sums them over ranks). The test's cpu backend is one
// object, so only one thread issues ops at a time: a baton mutex, released only while a thread
// waits for the other inside all_reduce_sum.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <barrier>
#include <mutex>
#include <span>
#include <thread>

#include "gradcheck.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::Tensor;
using kiln::nn::ImageShape;
using kiln::test::cpu;
using kiln::test::device_f32;
using kiln::test::random_values;
using kiln::test::read;

thread_local int this_rank = 0;

class TwoThreadSync final : public kiln::BatchNormSync {
 public:
  void attach(std::string_view) override { ++attached; }
  void all_reduce_sum(std::span<double> values) override {
    slots_[this_rank].assign(values.begin(), values.end());
    baton.unlock();
    turn_.arrive_and_wait();  // both deposited
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = slots_[0][i] + slots_[1][i];
    turn_.arrive_and_wait();  // both read before either deposits again
    baton.lock();
  }
  std::mutex baton;
  std::atomic<int> attached{0};

 private:
  std::barrier<> turn_{2};
  std::vector<double> slots_[2];
};

struct Layer {
  kiln::nn::ParameterStore store;
  kiln::nn::BatchNorm2d bn{store, "bn", 3};
  Layer(std::int64_t batch, kiln::BatchNormSync* sync) {
    store.set_batch_norm_sync(sync);
    store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 1);
    bn.build(cpu(), batch, ImageShape{3, 4, 2}, kiln::DType::f32);
    kiln::test::write(store[bn.weight_index()].value, {1.5, -0.7, 0.9});
    kiln::test::write(store[bn.bias_index()].value, {0.2, 0.4, -0.1});
    store.zero_grads(cpu());
  }
};

struct Result {
  std::vector<double> y, dx, dgamma, dbeta, running_mean, running_var;
};

Result step(Layer& l, const Tensor& x, const Tensor& dy) {
  Result r;
  r.y = read(l.bn.forward(x, kiln::Mode::train));
  r.dx = read(l.bn.backward(dy));
  r.dgamma = read(l.store[l.bn.weight_index()].grad);
  r.dbeta = read(l.store[l.bn.bias_index()].grad);
  r.running_mean = read(l.bn.buffers()[0].value);
  r.running_var = read(l.bn.buffers()[1].value);
  return r;
}

std::vector<double> slice(const std::vector<double>& v, std::size_t half, int which) {
  return {v.begin() + static_cast<std::ptrdiff_t>(which * half), v.begin() + static_cast<std::ptrdiff_t>((which + 1) * half)};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  BOOST_TEST_REQUIRE(got.size() == want.size(), what);
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(got[i] == want[i], what << "[" << i << "]" << boost::test_tools::tolerance(1e-4));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(batchnorm2d_synchronised_over_two_halves_equals_the_whole_batch) {
  constexpr std::int64_t B = 4, C = 3, H = 4, W = 2;
  const std::size_t half = static_cast<std::size_t>(B / 2 * C * H * W);
  const auto xv = random_values(B * C * H * W, 11, -2, 3);
  const auto dyv = random_values(B * C * H * W, 12);

  Layer whole(B, nullptr);
  const Result want = step(whole, device_f32({B, C, H, W}, xv), device_f32({B, C, H, W}, dyv));

  TwoThreadSync sync;
  Layer ranks[2] = {Layer(B / 2, &sync), Layer(B / 2, &sync)};
  BOOST_TEST(sync.attached.load() == 2);
  Result got[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      this_rank = r;
      std::lock_guard<std::mutex> hold(sync.baton);
      got[r] = step(ranks[r], device_f32({B / 2, C, H, W}, slice(xv, half, r)),
                    device_f32({B / 2, C, H, W}, slice(dyv, half, r)));
    });
  }
  for (std::thread& t : threads) t.join();

  for (int r = 0; r < 2; ++r) {
    expect_close(got[r].y, slice(want.y, half, r), "y");
    expect_close(got[r].dx, slice(want.dx, half, r), "dx");
    expect_close(got[r].running_mean, want.running_mean, "running_mean");
    expect_close(got[r].running_var, want.running_var, "running_var");
  }
  std::vector<double> dgamma(C), dbeta(C);
  for (std::size_t c = 0; c < static_cast<std::size_t>(C); ++c) {
    dgamma[c] = got[0].dgamma[c] + got[1].dgamma[c];
    dbeta[c] = got[0].dbeta[c] + got[1].dbeta[c];
  }
  expect_close(dgamma, want.dgamma, "dgamma summed over the two ranks");
  expect_close(dbeta, want.dbeta, "dbeta summed over the two ranks");
  // Not trivially equal: each half alone has other statistics than the whole batch.
  Layer alone(B / 2, nullptr);
  const Result own = step(alone, device_f32({B / 2, C, H, W}, slice(xv, half, 0)),
                          device_f32({B / 2, C, H, W}, slice(dyv, half, 0)));
  double largest = 0;
  for (std::size_t i = 0; i < half; ++i) largest = std::max(largest, std::abs(own.y[i] - want.y[i]));
  BOOST_TEST(largest > 0.05);
}
