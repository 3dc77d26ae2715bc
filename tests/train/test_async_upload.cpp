// The trainer with a backend whose uploads are really asynchronous, as on CUDA: to_device only
// enqueues the copy from the loader's pinned slot and returns. The DeferredBackend below wraps
// the real cpu backend and runs every op, in order, on its own "stream" thread, with each
// upload delayed, so the trainer (which never synchronizes per step in fp32) runs ahead of the
// stream. If the loader handed a slot back to its workers while its upload was still queued, a
// later batch would overwrite it and training would diverge from the plain cpu backend; with
// the upload event (Trainer -> DataLoader::release_after) the weights are bit-identical.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/trainer.hpp"
#include "train_fixture.hpp"
#include "../support/forwarding_backend.hpp"

namespace {

using namespace kiln;

/// Every op of `inner` on one worker thread, in call order; to_device enqueues a copy that
/// starts after `upload_delay`. Host reads (copy into host memory, synchronize) drain the queue.
class DeferredBackend final : public test::ForwardingBackend {
 public:
  DeferredBackend(std::shared_ptr<Backend> inner, std::chrono::microseconds upload_delay)
      : ForwardingBackend(std::move(inner)), delay_(upload_delay), thread_([this] { loop(); }) {}
  ~DeferredBackend() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::int64_t uploads() const { return uploads_.load(); }
  /// Most uploads enqueued and not yet copied when another was enqueued. A step uploads two
  /// tensors, so 3 or more means a step's uploads were still queued when the trainer had already
  /// taken the next batch: the moment a refilled slot would be read late.
  int max_pending_uploads() const {
    std::lock_guard lock(mu_);
    return max_pending_uploads_;
  }

  std::string_view name() const override { return "deferred-cpu"; }

  void copy(const Tensor& src, const Tensor& dst) override {
    if (dst.memory() == MemoryKind::device) {
      run_op([=, this] { inner().copy(src, dst); });
    } else {  // a copy into host memory is complete when it returns
      drain();
      inner().copy(src, dst);
    }
  }
  Tensor to_device(const Tensor& host) override {
    if (host.memory() == MemoryKind::device) return host;
    Tensor device = inner().allocate(host.shape(), host.dtype(), MemoryKind::device);
    ++uploads_;
    {
      std::lock_guard lock(mu_);
      max_pending_uploads_ = std::max(max_pending_uploads_, ++pending_uploads_);
    }
    // Reads `host` (the loader's pinned slot) only when the stream gets there, like
    // cudaMemcpyAsync; the Tensor handle keeps the memory alive, not its contents.
    run_op([=, this] {
      std::this_thread::sleep_for(delay_);
      inner().copy(host, device);
      std::lock_guard lock(mu_);
      --pending_uploads_;
    });
    return device;
  }

  void synchronize() override {
    drain();
    inner().synchronize();
  }
  std::shared_ptr<Event> record_event(StreamKind) override {
    std::lock_guard lock(mu_);
    return std::make_shared<StreamEvent>(this, enqueued_);
  }
  void wait_event(StreamKind, const Event&) override {}  // one stream: already ordered
  void* native_stream(StreamKind) override { return nullptr; }

 private:
  class StreamEvent final : public Event {
   public:
    StreamEvent(DeferredBackend* backend, std::uint64_t ticket) : backend_(backend), ticket_(ticket) {}
    void synchronize() override { backend_->wait_for(ticket_); }  // any thread (loader workers)

   private:
    DeferredBackend* backend_;
    std::uint64_t ticket_;
  };

  /// Every op, in call order, onto the stream thread.
  void run_op(std::function<void()> op) override {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(op));
      ++enqueued_;
    }
    cv_.notify_all();
  }
  void wait_for(std::uint64_t ticket) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_ >= ticket || error_; });
    if (error_) std::rethrow_exception(error_);
  }
  void drain() {
    std::uint64_t ticket = 0;
    {
      std::lock_guard lock(mu_);
      ticket = enqueued_;
    }
    wait_for(ticket);
  }
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop, nothing left
      std::function<void()> op = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      std::exception_ptr error;
      try {
        op();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;
      ++done_;
      cv_.notify_all();
    }
  }

  std::chrono::microseconds delay_;
  std::atomic<std::int64_t> uploads_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t enqueued_ = 0, done_ = 0;
  int pending_uploads_ = 0, max_pending_uploads_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after everything above exists
};

using Run = test::PluginRun;

struct Result {
  std::vector<double> weights;
  double eval_loss = 0, eval_accuracy = 0;
  std::int64_t uploads = 0;
  int max_pending_uploads = 0;
  std::optional<double> eval_top5;
};

/// Two epochs of the MLP on 640 Fashion-MNIST samples, evaluated on 320 test samples after each,
/// batch 32, 2 workers, prefetch 1 (two staging slots, so a slot is refilled two steps after it
/// was handed out); the final weights and evaluation.
Result train_mlp(bool deferred_uploads) {
  Run run;
  using R = plugin::Registry;
  std::shared_ptr<Backend> cpu = run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &R::create_backend);
  std::shared_ptr<DeferredBackend> deferred;
  if (deferred_uploads) {
    deferred = std::make_shared<DeferredBackend>(cpu, std::chrono::microseconds(2000));
    run.parts.backend = deferred;
  } else {
    run.parts.backend = cpu;
  }
  run.parts.comm = run.make(KILN_KIND_COMMUNICATOR, "local", "", &R::create_communicator);
  run.parts.precision = run.make(KILN_KIND_PRECISION, "fp32", "", &R::create_precision);
  run.parts.model = run.make(KILN_KIND_MODEL, "mlp", "hidden = [16]\ndropout = 0.2", &R::create_model);
  run.parts.train_data = run.make(KILN_KIND_DATA, "mnist", "limit = 640", &R::create_data);
  run.parts.eval_data = run.make(KILN_KIND_DATA, "mnist", "split = \"test\"\nlimit = 320", &R::create_data);
  CommContext cc;
  cc.backend = run.parts.backend.get();
  run.parts.comm->connect(cc);

  train::TrainerOptions o;
  o.epochs = 2;
  o.seed = 11;
  o.train_loader.shard.batch = 32;
  o.train_loader.shard.seed = 11;
  o.train_loader.workers = 2;
  o.train_loader.prefetch = 1;
  o.eval_loader = o.train_loader;  // the eval loop uploads from pinned slots too
  o.eval_loader.shard.shuffle = data::Shuffle::no;
  o.optimizer_type = "sgd";
  o.optimizer_table = test::core_table("optimizer", "lr = 0.05\nmomentum = 0.9", train::optimizer_schema("sgd"));
  o.schedule_type = "constant";
  o.schedule_table = test::core_table("schedule", "", train::schedule_schema("constant"));
  o.progress = io::Progress::Mode::never;
  auto model = run.parts.model;
  auto backend = run.parts.backend;
  train::TrainResult result;
  {
    train::Trainer trainer(run.parts, o, RankInfo{}, nullptr);
    result = trainer.run();
  }
  backend->synchronize();
  Result out;
  out.eval_loss = result.final_eval_loss;
  out.eval_accuracy = result.final_eval_accuracy;
  out.eval_top5 = result.final_eval_accuracy_top5;
  for (const auto& p : model->parameters()) {
    const auto v = test::read(p.value);
    out.weights.insert(out.weights.end(), v.begin(), v.end());
  }
  if (deferred) {
    out.uploads = deferred->uploads();
    out.max_pending_uploads = deferred->max_pending_uploads();
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(late_uploads_train_bit_identically_to_the_cpu_backend) {
  const Result cpu = train_mlp(false);
  const Result deferred = train_mlp(true);
  const std::vector<double>& plain = cpu.weights;
  const std::vector<double>& late = deferred.weights;
  // Two uploads (inputs, labels) per step: 20 training and 10 evaluation steps per epoch, 2
  // epochs; and the trainer really took batches while earlier uploads were still queued.
  BOOST_TEST(deferred.uploads == 2 * (20 + 10) * 2);
  BOOST_TEST_MESSAGE("uploads queued at once, at most: " << deferred.max_pending_uploads);
  BOOST_TEST(deferred.max_pending_uploads >= 3, "the stream never fell behind a step: at most "
                                                    << deferred.max_pending_uploads << " uploads queued");
  BOOST_REQUIRE_EQUAL(plain.size(), late.size());
  BOOST_REQUIRE(!plain.empty());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) differ += plain[i] != late[i] ? 1 : 0;  // bit-identical
  BOOST_TEST(differ == 0u, differ << " of " << plain.size() << " weights differ from the plain cpu run");
  BOOST_TEST(cpu.eval_loss > 0.0);
  BOOST_TEST(deferred.eval_loss == cpu.eval_loss);  // bit-identical evaluation too
  BOOST_TEST(deferred.eval_accuracy == cpu.eval_accuracy);
  // Ten classes: the evaluation counts top-5 too, on the device (Backend::top_k_hits), so the
  // uploads above still ran ahead during it.
  BOOST_TEST_REQUIRE(cpu.eval_top5.has_value());
  BOOST_TEST_REQUIRE(deferred.eval_top5.has_value());
  BOOST_TEST(*cpu.eval_top5 >= cpu.eval_accuracy);
  BOOST_TEST(*deferred.eval_top5 == *cpu.eval_top5);
}
