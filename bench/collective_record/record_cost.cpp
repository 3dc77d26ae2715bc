// What the collective flight recorder (core/include/kiln/train/collective_recorder.hpp) adds to
// one collective: N all_reduce + wait pairs on a communicator whose work is already complete, once
// called directly and once through RecordingCommunicator, alternating in rounds; ns per
// collective for each and the difference. The real collective underneath costs microseconds
// (Gloo's smallest all-reduce on one host) to milliseconds, which the table in
// docs/distributed.md puts next to the figure printed here.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>
#include <algorithm>

#include "kiln/communicator.hpp"
#include "kiln/train/collective_purpose.hpp"
#include "kiln/train/collective_recorder.hpp"

namespace {

class DoneWork final : public kiln::Work {
 public:
  void wait() override {}
};

/// Completes every collective at once: only the caller's side is measured.
class InstantComm final : public kiln::Communicator {
 public:
  std::string_view name() const override { return "instant"; }
  void connect(const kiln::CommContext&) override {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool accepts(kiln::MemoryKind) const override { return true; }
  std::string describe() const override { return "instant"; }
  std::unique_ptr<kiln::Work> all_reduce(const kiln::Tensor&, kiln::ReduceOp) override {
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<kiln::Work> broadcast(const kiln::Tensor&, int) override { return std::make_unique<DoneWork>(); }
  std::unique_ptr<kiln::Work> all_gather(const kiln::Tensor&, const kiln::Tensor&) override {
    return std::make_unique<DoneWork>();
  }
  void barrier() override {}
  void abort() noexcept override {}
};

double ns_per_collective(kiln::Communicator& comm, const kiln::Tensor& t, int n) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    const kiln::train::CollectivePurpose purpose("gradients, bucket", i & 7);
    comm.all_reduce(t, kiln::ReduceOp::sum)->wait();
  }
  const std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - start;
  return d.count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  auto inner = std::make_shared<InstantComm>();
  auto recorder = std::make_shared<kiln::train::CollectiveRecorder>(256);
  kiln::train::RecordingCommunicator recording(inner, recorder);
  recording.connect(kiln::CommContext{});
  const kiln::Tensor grads = kiln::host_tensor({101770}, kiln::DType::f32);
  std::vector<double> direct, recorded;
  for (int r = 0; r < rounds; ++r) {
    direct.push_back(ns_per_collective(*inner, grads, n));
    recorded.push_back(ns_per_collective(recording, grads, n));
  }
  std::sort(direct.begin(), direct.end());
  std::sort(recorded.begin(), recorded.end());
  const double d = direct[direct.size() / 2], c = recorded[recorded.size() / 2];
  std::printf("collectives per round %d, rounds %d (medians)\n", n, rounds);
  std::printf("direct                 %8.1f ns per collective\n", d);
  std::printf("through the recorder   %8.1f ns per collective\n", c);
  std::printf("recorder cost          %8.1f ns per collective\n", c - d);
  return 0;
}
