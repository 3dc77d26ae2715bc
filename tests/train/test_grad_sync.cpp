// GradSync against a recording fake Communicator: bucket boundaries for a small bucket_bytes,
// each bucket's all-reduce launched the moment its last parameter is reported (before
// finish()), unreported parameters still reduced at finish(), and every launch waited for;
// frozen parameters ([model] freeze) in no bucket, and the gradient views the trainer zeroes.
//
// Layout used throughout: five f32 parameters of 10, 20, 30, 5 and 8 elements; each starts on a
// 16-element (64-byte) boundary, so their element offsets are 0, 16, 48, 80, 96.
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"
#include "kiln/train/freeze.hpp"
#include "kiln/train/grad_sync.hpp"
#include "train_fixture.hpp"

namespace {

struct Call {
  std::string op;  // "all_reduce" or "wait"
  std::int64_t offset = 0, numel = 0;  // in elements of the gradient arena
  kiln::ReduceOp reduce = kiln::ReduceOp::avg;
  const kiln::Storage* storage = nullptr;
};

class RecordingComm final : public kiln::Communicator {
 public:
  std::vector<Call> calls;

  class RecordedWork final : public kiln::Work {
   public:
    RecordedWork(RecordingComm& comm, Call call) : comm_(comm), call_(std::move(call)) {}
    void wait() override {
      Call c = call_;
      c.op = "wait";
      comm_.calls.push_back(c);
    }

   private:
    RecordingComm& comm_;
    Call call_;
  };

  std::string_view name() const override { return "recording"; }
  void connect(const kiln::CommContext&) override {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool accepts(kiln::MemoryKind) const override { return true; }
  std::string describe() const override { return "recording fake"; }
  std::unique_ptr<kiln::Work> all_reduce(const kiln::Tensor& t, kiln::ReduceOp op) override {
    Call c{"all_reduce", static_cast<std::int64_t>(t.offset_bytes() / 4), t.numel(), op, t.storage().get()};
    calls.push_back(c);
    return std::make_unique<RecordedWork>(*this, c);
  }
  std::unique_ptr<kiln::Work> broadcast(const kiln::Tensor&, int) override {
    throw kiln::CommError("RecordingComm: broadcast is not expected from GradSync");
  }
  std::unique_ptr<kiln::Work> all_gather(const kiln::Tensor&, const kiln::Tensor&) override {
    throw kiln::CommError("RecordingComm: all_gather is not expected from GradSync");
  }
  void barrier() override {}
  void abort() noexcept override {}

  std::size_t count(const std::string& op) const {
    std::size_t n = 0;
    for (const auto& c : calls) n += c.op == op;
    return n;
  }
};

struct FiveParams {
  kiln::nn::ParameterStore store;
  FiveParams() {
    const std::vector<std::int64_t> sizes = {10, 20, 30, 5, 8};
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      store.declare(fmt::format("p{}", i), {sizes[i]}, kiln::nn::Init::zeros());
    }
    store.allocate(kiln::test::cpu(), kiln::DType::f32, kiln::DType::f32, 1);
  }
};

void expect_reduce(const Call& c, std::int64_t offset, std::int64_t numel, const kiln::Storage* storage) {
  BOOST_TEST(c.op == "all_reduce");
  BOOST_TEST(c.offset == offset);
  BOOST_TEST(c.numel == numel);
  BOOST_TEST((c.reduce == kiln::ReduceOp::sum));  // the loss gradient is already divided
  BOOST_TEST(c.storage == storage);
}

BOOST_AUTO_TEST_CASE(buckets_close_in_reverse_order_at_bucket_bytes) {
  FiveParams fp;
  const auto* grads = fp.store.grad_arena().storage().get();
  RecordingComm comm;
  // From the last parameter: p4 (32 B) + p3 (20 B) < 64, + p2 (120 B) closes bucket {2, 3, 4};
  // p1 (80 B) >= 64 alone; p0 (40 B) is what is left.
  kiln::train::GradSync sync(comm, fp.store.parameters(), 64);
  BOOST_TEST(sync.num_buckets() == 3u);

  sync.begin_step();
  const kiln::GradReadyFn ready = sync.ready_callback();
  ready(4);
  ready(3);
  BOOST_TEST(comm.calls.empty());
  ready(2);  // completes {2, 3, 4}: launched now, not at finish()
  BOOST_TEST_REQUIRE(comm.calls.size() == 1u);
  expect_reduce(comm.calls[0], 48, 56, grads);  // elements 48 .. 96 + 8
  ready(2);  // reporting twice is harmless
  BOOST_TEST(comm.calls.size() == 1u);
  ready(1);
  BOOST_TEST_REQUIRE(comm.calls.size() == 2u);
  expect_reduce(comm.calls[1], 16, 20, grads);
  ready(0);
  BOOST_TEST_REQUIRE(comm.calls.size() == 3u);
  expect_reduce(comm.calls[2], 0, 10, grads);
  BOOST_TEST(comm.count("wait") == 0u);  // nothing waited for before finish()

  sync.finish();
  BOOST_TEST(comm.count("all_reduce") == 3u);  // finish() launched nothing more
  BOOST_TEST(comm.count("wait") == 3u);
  BOOST_TEST(sync.describe().find("3 bucket(s)") == 0);
}

BOOST_AUTO_TEST_CASE(unreported_parameters_are_reduced_at_finish) {
  FiveParams fp;
  RecordingComm comm;
  kiln::train::GradSync sync(comm, fp.store.parameters(), 64);
  for (int step = 0; step < 2; ++step) {  // the second step proves begin_step() resets the marks
    comm.calls.clear();
    sync.begin_step();
    const kiln::GradReadyFn ready = sync.ready_callback();
    ready(4);
    ready(2);
    ready(0);  // bucket {0} complete; {2, 3, 4} waits for p3; {1} for p1
    BOOST_TEST_REQUIRE(comm.calls.size() == 1u);
    BOOST_TEST(comm.calls[0].offset == 0);
    sync.finish();
    BOOST_TEST(comm.count("all_reduce") == 3u);
    BOOST_TEST(comm.count("wait") == 3u);
    // The two incomplete buckets are launched by finish(), before any wait.
    BOOST_TEST_REQUIRE(comm.calls.size() == 6u);
    BOOST_TEST(comm.calls[1].op == "all_reduce");
    BOOST_TEST(comm.calls[2].op == "all_reduce");
    BOOST_TEST(comm.calls[1].offset + comm.calls[2].offset == 48 + 16);
  }
}

BOOST_AUTO_TEST_CASE(one_bucket_when_bucket_bytes_is_large) {
  FiveParams fp;
  RecordingComm comm;
  kiln::train::GradSync sync(comm, fp.store.parameters(), 25'000'000);
  BOOST_TEST(sync.num_buckets() == 1u);
  sync.begin_step();
  const kiln::GradReadyFn ready = sync.ready_callback();
  for (std::size_t i = 5; i-- > 1;) ready(i);
  BOOST_TEST(comm.calls.empty());
  ready(0);
  BOOST_TEST_REQUIRE(comm.calls.size() == 1u);
  expect_reduce(comm.calls[0], 0, 104, fp.store.grad_arena().storage().get());
  sync.finish();
  BOOST_TEST(comm.count("wait") == 1u);
}

BOOST_AUTO_TEST_CASE(one_bucket_per_parameter_when_bucket_bytes_is_tiny) {
  FiveParams fp;
  RecordingComm comm;
  kiln::train::GradSync sync(comm, fp.store.parameters(), 1);
  BOOST_TEST(sync.num_buckets() == 5u);
  sync.begin_step();
  const kiln::GradReadyFn ready = sync.ready_callback();
  const std::vector<std::int64_t> offsets = {0, 16, 48, 80, 96}, sizes = {10, 20, 30, 5, 8};
  for (std::size_t i = 5; i-- > 0;) {
    ready(i);
    BOOST_TEST_REQUIRE(comm.calls.size() == 5 - i);
    BOOST_TEST(comm.calls.back().offset == offsets[i]);
    BOOST_TEST(comm.calls.back().numel == sizes[i]);
  }
  sync.finish();
}

// [model] freeze: p1 and p3 frozen. No bucket holds or spans them (p4 alone, p2 alone, p0
// alone, even with room for more), their reports are ignored and never waited for, and finish()
// does not name them as missing.
BOOST_AUTO_TEST_CASE(frozen_parameters_belong_to_no_bucket) {
  FiveParams fp;
  const auto* grads = fp.store.grad_arena().storage().get();
  RecordingComm comm;
  kiln::train::GradSync sync(comm, fp.store.parameters(), 25'000'000, {"p1", "p3"});
  BOOST_TEST(sync.num_buckets() == 3u);
  sync.begin_step();
  const kiln::GradReadyFn ready = sync.ready_callback();
  ready(4);
  BOOST_TEST_REQUIRE(comm.calls.size() == 1u);
  expect_reduce(comm.calls[0], 96, 8, grads);
  ready(3);
  BOOST_TEST(comm.calls.size() == 1u);
  ready(2);
  BOOST_TEST_REQUIRE(comm.calls.size() == 2u);
  expect_reduce(comm.calls[1], 48, 30, grads);
  ready(0);  // p1 never reported: frozen, so not waited for
  BOOST_TEST_REQUIRE(comm.calls.size() == 3u);
  expect_reduce(comm.calls[2], 0, 10, grads);
  sync.finish();
  BOOST_TEST(comm.count("all_reduce") == 3u);
  BOOST_TEST(comm.count("wait") == 3u);
  BOOST_TEST(sync.describe() == "3 bucket(s), 0.00 MB of gradients");
}

// The loss check's carrier (loss_mark.hpp) is an element the first bucket sums: with p4 frozen,
// p3's first (element 80), and none when every parameter is frozen.
BOOST_AUTO_TEST_CASE(the_carrier_is_the_first_element_of_the_first_bucket) {
  FiveParams fp;
  RecordingComm comm;
  const kiln::Tensor carrier = kiln::train::GradSync(comm, fp.store.parameters(), 64).carrier();
  BOOST_TEST_REQUIRE(carrier.defined());
  BOOST_TEST(carrier.numel() == 1);
  BOOST_TEST(carrier.offset_bytes() == 48u * 4u);  // bucket {2, 3, 4} starts at p2
  BOOST_TEST(carrier.storage() == fp.store.grad_arena().storage());
  const kiln::Tensor past_frozen =
      kiln::train::GradSync(comm, fp.store.parameters(), 4, {"p4"}).carrier();
  BOOST_TEST(past_frozen.offset_bytes() == 80u * 4u);
  BOOST_TEST(!kiln::train::GradSync(comm, fp.store.parameters(), 64, {"p0", "p1", "p2", "p3", "p4"})
                  .carrier()
                  .defined());
  BOOST_TEST(comm.calls.empty());
}

// The views the trainer zeroes after backward: one per run of consecutive frozen parameters,
// never across a trainable one (p1 between p0 and p2 keeps its gradient).
BOOST_AUTO_TEST_CASE(frozen_gradient_views_never_cover_a_trainable_parameter) {
  FiveParams fp;
  const kiln::train::FrozenParameters frozen(fp.store.parameters(), {{"p[02]", "p3"}, "model.freeze (test)"}, "test");
  BOOST_TEST(frozen.names() == (std::set<std::string>{"p0", "p2", "p3"}), boost::test_tools::per_element());
  const auto views = frozen.grad_views(fp.store.parameters());
  BOOST_TEST_REQUIRE(views.size() == 2u);
  BOOST_TEST(views[0].offset_bytes() == 0u);
  BOOST_TEST(views[0].numel() == 10);
  BOOST_TEST(views[1].offset_bytes() == 48 * sizeof(float));
  BOOST_TEST(views[1].numel() == 80 + 5 - 48);  // p2 up to the end of p3, the gap between them included
  BOOST_TEST(frozen.describe(fp.store.parameters()) ==
             "freeze: 3 of 5 tensors (45 of 73 values) by model.freeze (test); trainable: p1, p4; test computes "
             "their gradients anyway (0 of 3 marked kParamFrozen; it does not read ModelBuildContext::frozen)");
}

// A model that reads ModelBuildContext::frozen marks what it was told (ParameterStore::set_frozen);
// the log line then says it skips the work, and one that marks a parameter the run trains is
// refused, since its gradient might never be computed.
BOOST_AUTO_TEST_CASE(model_marks_must_match_the_patterns) {
  const kiln::train::FreezeRequest request{{"p[02]", "p3"}, "model.freeze (test)"};
  BOOST_TEST(request.matches("p2"));
  BOOST_TEST(!request.matches("p1"));
  FiveParams fp;
  fp.store.set_frozen([&](std::string_view name) { return request.matches(name); });
  BOOST_TEST(fp.store.frozen(0));
  BOOST_TEST(!fp.store.frozen(1));
  BOOST_TEST(!fp.store.trains_before(1));  // p0 is frozen
  BOOST_TEST(fp.store.trains_before(2));   // p1 trains
  const kiln::train::FrozenParameters frozen(fp.store.parameters(), request, "test");
  BOOST_TEST(frozen.describe(fp.store.parameters()) ==
             "freeze: 3 of 5 tensors (45 of 73 values) by model.freeze (test); trainable: p1, p4; test skips their "
             "backward work");

  fp.store.set_frozen([&](std::string_view name) { return name != "p4"; });  // p1 marked too
  BOOST_TEST(kiln::test::error_text<kiln::PluginError>([&] {
               kiln::train::FrozenParameters(fp.store.parameters(), request, "test");
             }) == "model 'test' marks parameter 'p1' frozen (kParamFrozen), but model.freeze (test) does not name "
                   "it; the model would leave out a gradient the run trains on (a bug in the model plugin: mark "
                   "exactly the parameters ModelBuildContext::frozen names)");
  fp.store.set_frozen(nullptr);  // no function: nothing frozen
  BOOST_TEST(!fp.store.frozen(0));
  BOOST_TEST(fp.store.trains_before(1));
}

BOOST_AUTO_TEST_CASE(frozen_bn_eval_needs_marked_buffers_and_train_refuses_them) {
  kiln::train::FreezeRequest request{{"bn.*"}, "model.freeze (test)"};
  request.batch_norm_where = "model.frozen_bn (test)";
  const kiln::Tensor stat;  // only names and flags are read
  const std::vector<kiln::ModelBuffer> unmarked = {{"bn.running_mean", stat}, {"bn.running_var", stat}};
  std::vector<kiln::ModelBuffer> marked = unmarked;
  marked[0].flags = marked[1].flags = kiln::kBufferFrozen;

  BOOST_TEST(!kiln::train::check_frozen_buffers(unmarked, request, "m").has_value());  // train: nothing to say
  BOOST_TEST(kiln::test::error_text<kiln::PluginError>([&] { (void)kiln::train::check_frozen_buffers(marked, request, "m"); }) ==
             "model 'm' marks buffer 'bn.running_mean' frozen (kBufferFrozen), but model.frozen_bn is \"train\"; its "
             "batch-norm layers would not update their running statistics as asked (a bug in the model plugin: mark "
             "buffers only under ModelBuildContext::frozen_bn = Mode::eval)");

  request.batch_norm = kiln::Mode::eval;
  BOOST_TEST(*kiln::train::check_frozen_buffers(marked, request, "m") ==
             "frozen_bn = \"eval\" by model.frozen_bn (test): 2 of 2 running statistics (model buffers) stay as they "
             "are; their batch-norm layers normalise with them in training too: bn.running_mean, bn.running_var");
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] { (void)kiln::train::check_frozen_buffers(unmarked, request, "m"); }) ==
             "model.frozen_bn (test) = \"eval\", but model 'm' keeps no running statistics frozen: it has no batch-norm "
             "layer whose weight and bias model.freeze (test) both freezes, or it does not read "
             "ModelBuildContext::frozen_bn; remove the key");
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] { (void)kiln::train::check_frozen_buffers({}, request, "m"); })
                 .find("(it has no buffers at all)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(gradients_in_two_arenas_are_refused) {
  FiveParams a, b;
  std::vector<kiln::Parameter> mixed = {a.store[0], b.store[1]};
  mixed[1].name = "other.weight";
  RecordingComm comm;
  BOOST_TEST(kiln::test::error_text<kiln::BackendError>([&] {
               kiln::train::GradSync sync(comm, mixed, 64);
             }) == "GradSync needs every gradient in one arena; parameter 'other.weight' is not");
}

}  // namespace
