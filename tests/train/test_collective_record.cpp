// The collective flight recorder: RecordingCommunicator notes what it forwards (purpose, state,
// the ring's latest entries), the record survives its JSON round trip and refuses damaged files,
// a stop signal or a crash writes it before the process ends as the signal would end it (a crash
// from inside the fatal-signal handler, in the same format), and the report names the rank the
// others waited for in each situation it distinguishes.
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/crash/fatal_signal_report.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/collective_purpose.hpp"
#include "kiln/train/collective_recorder.hpp"
#include "kiln/train/collective_report.hpp"
#include "kiln/train/record_on_signal.hpp"
#include "kiln/train/stall_warning.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;
using kiln::train::CollectiveEntry;
using kiln::train::RankTrace;

namespace {

/// A Work that completes, or fails with `error` when it is not empty.
class FakeWork final : public kiln::Work {
 public:
  explicit FakeWork(std::string error) : error_(std::move(error)) {}
  void wait() override {
    if (!error_.empty()) throw kiln::CommError(error_);
  }

 private:
  std::string error_;
};

/// One rank of two; the next collective fails when `fail_next` is set.
class FakeComm final : public kiln::Communicator {
 public:
  std::string fail_next;
  std::string_view name() const override { return "fake"; }
  void connect(const kiln::CommContext&) override {}
  int rank() const override { return 1; }
  int size() const override { return 2; }
  bool accepts(kiln::MemoryKind) const override { return true; }
  std::string describe() const override { return "fake ring"; }
  std::unique_ptr<kiln::Work> all_reduce(const kiln::Tensor&, kiln::ReduceOp) override { return work(); }
  std::unique_ptr<kiln::Work> broadcast(const kiln::Tensor&, int) override { return work(); }
  std::unique_ptr<kiln::Work> all_gather(const kiln::Tensor&, const kiln::Tensor&) override { return work(); }
  void barrier() override {}
  void abort() noexcept override {}

 private:
  std::unique_ptr<kiln::Work> work() {
    auto w = std::make_unique<FakeWork>(fail_next);
    fail_next.clear();
    return w;
  }
};

struct Recording {
  std::shared_ptr<FakeComm> fake = std::make_shared<FakeComm>();
  std::shared_ptr<kiln::train::CollectiveRecorder> recorder;
  std::unique_ptr<kiln::train::RecordingCommunicator> comm;
  explicit Recording(std::size_t capacity)
      : recorder(std::make_shared<kiln::train::CollectiveRecorder>(capacity)),
        comm(std::make_unique<kiln::train::RecordingCommunicator>(fake, recorder)) {
    comm->connect(kiln::CommContext{});
  }
};

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("kiln-test-collectives-{}-{}", ::getpid(), n++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

CollectiveEntry entry(std::int64_t seq, const std::string& op, std::int64_t count, bool done,
                      const std::string& purpose = "gradients, bucket 0") {
  CollectiveEntry e;
  e.seq = seq;
  e.op = op;
  e.dtype = "f32";
  e.count = count;
  e.purpose = purpose;
  e.phase = "training";
  e.epoch = 1;
  e.step = seq;
  e.issued_ms = 1'000'000 + seq * 10;
  e.wait_ms = e.issued_ms;
  e.end_ms = done ? e.issued_ms + 2 : -1;
  return e;
}

/// A record of `rank` of `world` that issued collectives 1..issued (all_reduce of 100 floats),
/// the first `completed` of them done.
RankTrace trace(int rank, int world, std::int64_t issued, std::int64_t completed,
                const std::string& reason = "received SIGTERM") {
  RankTrace t;
  t.rank = rank;
  t.world = world;
  t.host = "vm";
  t.pid = 100 + rank;
  t.communicator = "fake ring";
  t.reason = reason;
  t.phase = "training";
  t.epoch = 1;
  t.epochs = 2;
  t.step = issued;
  t.steps = 50;
  t.started_ms = 999'000;
  t.written_ms = 1'005'000;
  t.issued = issued;
  for (std::int64_t s = 1; s <= issued; ++s) t.entries.push_back(entry(s, "all_reduce(sum)", 100, s <= completed));
  return t;
}

void write(const fs::path& dir, const RankTrace& t) {
  std::ofstream(dir / fmt::format("rank{}.json", t.rank)) << kiln::train::to_json(t);
}

std::string verdict_of(const fs::path& dir) { return kiln::train::verdict(kiln::train::read_traces(dir)); }

bool contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  BOOST_TEST_MESSAGE("not found: '" << part << "' in: " << text);
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(collective_record)

BOOST_AUTO_TEST_CASE(records_what_it_forwards_with_purpose_and_state) {
  Recording r(8);
  const kiln::Tensor grads = kiln::host_tensor({10}, kiln::DType::f32);
  {
    const kiln::train::CollectivePurpose purpose("gradients, bucket", 2);
    r.comm->all_reduce(grads, kiln::ReduceOp::sum)->wait();
  }
  auto pending = r.comm->broadcast(kiln::host_tensor({3}, kiln::DType::i64), 0);  // issued, never waited for
  r.comm->barrier();
  r.fake->fail_next = "peer rank 0 closed the connection";
  auto failing = r.comm->all_gather(kiln::host_tensor({4}, kiln::DType::f32), grads);
  BOOST_CHECK_THROW(failing->wait(), kiln::CommError);

  const RankTrace t = r.recorder->snapshot("test");
  BOOST_TEST(t.rank == 1);
  BOOST_TEST(t.world == 2);
  BOOST_TEST(t.communicator == "fake ring");
  BOOST_TEST(t.issued == 4);
  BOOST_TEST_REQUIRE(t.entries.size() == 4u);
  BOOST_TEST(t.entries[0].signature() == "all_reduce(sum) f32 x 10");
  BOOST_TEST(t.entries[0].purpose == "gradients, bucket 2");
  BOOST_TEST(t.entries[0].completed());
  BOOST_TEST(t.entries[1].signature() == "broadcast(root 0) i64 x 3");
  BOOST_TEST(t.entries[1].purpose.empty());  // issued outside every purpose scope
  BOOST_TEST(t.entries[1].wait_ms == -1);
  BOOST_TEST(!t.entries[1].completed());
  BOOST_TEST(t.entries[2].signature() == "barrier");
  BOOST_TEST(t.entries[2].completed());
  BOOST_TEST(t.entries[3].signature() == "all_gather f32 x 10");
  BOOST_TEST(t.entries[3].failed());
  BOOST_TEST(t.entries[3].error == "peer rank 0 closed the connection");
}

BOOST_AUTO_TEST_CASE(the_ring_keeps_the_latest_entries) {
  Recording r(3);
  const kiln::Tensor x = kiln::host_tensor({1}, kiln::DType::f64);
  for (int i = 0; i < 7; ++i) r.comm->all_reduce(x, kiln::ReduceOp::sum)->wait();
  const RankTrace t = r.recorder->snapshot("test");
  BOOST_TEST(t.issued == 7);
  BOOST_TEST_REQUIRE(t.entries.size() == 3u);
  BOOST_TEST(t.entries.front().seq == 5);
  BOOST_TEST(t.entries.back().seq == 7);
}

BOOST_AUTO_TEST_CASE(the_json_round_trip_keeps_every_field) {
  RankTrace t = trace(1, 4, 3, 2, "collective #3 timed out after 5 s waiting for rank 2");
  t.entries[2].error = "timed out \"after\" 5 s";
  const RankTrace back = kiln::train::parse_rank_trace(kiln::train::to_json(t), "rank1.json");
  BOOST_TEST(kiln::train::to_json(back) == kiln::train::to_json(t));
  BOOST_TEST(back.entries[2].error == "timed out \"after\" 5 s");
  BOOST_TEST(back.reason == t.reason);
}

BOOST_AUTO_TEST_CASE(a_damaged_record_is_refused_naming_what_is_wrong) {
  const std::string good = kiln::train::to_json(trace(0, 2, 2, 2));
  auto refused = [](const std::string& text, const std::string& part) {
    try {
      kiln::train::parse_rank_trace(text, "debug/rank0.json");
    } catch (const kiln::DataError& e) {
      return contains(e.what(), "debug/rank0.json") && contains(e.what(), part);
    }
    return false;
  };
  BOOST_TEST(refused(good.substr(0, good.size() / 2), "debug/rank0.json"));  // cut short
  std::string no_reason = good;
  no_reason.replace(no_reason.find("\"reason\""), 8, "\"motive\"");
  BOOST_TEST(refused(no_reason, "field 'reason' is missing"));
  std::string swapped = good;
  swapped.replace(swapped.find("\"seq\": 1"), 8, "\"seq\": 9");
  BOOST_TEST(refused(swapped, "out of order"));
  std::string other = good;
  other.replace(other.find("kiln-collectives-1"), 18, "kiln-collectives-7");
  BOOST_TEST(refused(other, "not kiln-collectives-1"));
}

BOOST_AUTO_TEST_CASE(only_the_first_dump_is_written) {
  TempDir dir;
  Recording r(4);
  BOOST_TEST(r.recorder->dump("before the run directory exists").empty());
  r.recorder->write_into(dir.path / "debug");
  const fs::path file = r.recorder->dump("collective #1 timed out");
  BOOST_TEST(file == dir.path / "debug" / "rank1.json");
  BOOST_TEST(r.recorder->dump("received SIGTERM").empty());
  const auto set = kiln::train::read_traces(dir.path / "debug");
  BOOST_TEST_REQUIRE(set.traces.size() == 1u);
  BOOST_TEST(set.traces[0].reason == "collective #1 timed out");
}

BOOST_AUTO_TEST_CASE(sigterm_writes_the_record_and_still_ends_the_process) {
  TempDir dir;
  const pid_t pid = ::fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    Recording r(4);
    r.comm->all_reduce(kiln::host_tensor({5}, kiln::DType::f32), kiln::ReduceOp::sum);  // left in flight
    r.recorder->write_into(dir.path);
    kiln::train::RecordOnStopSignal on_stop([&r](const std::string& why) { r.recorder->dump(why); });
    ::raise(SIGTERM);
    ::sleep(10);  // the watcher thread ends the process long before this
    ::_exit(3);
  }
  int status = 0;
  BOOST_TEST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST((WIFSIGNALED(status) ? WTERMSIG(status) : 0) == SIGTERM);
  const auto set = kiln::train::read_traces(dir.path);
  BOOST_TEST_REQUIRE(set.traces.size() == 1u);
  BOOST_TEST(set.traces[0].reason == "received SIGTERM");
  BOOST_TEST(set.traces[0].issued == 1);
}

// A crash writes the record from inside the fatal-signal handler, by hand (io::BufferOut): it must
// be the very document an ordinary dump writes, so `kiln collectives` reads both alike.
BOOST_AUTO_TEST_CASE(the_record_written_on_a_fatal_signal_is_the_ordinary_dump_byte_for_byte) {
  TempDir dir;
  Recording r(3);  // 5 issued, so the ring has wrapped: the entries are #3..#5
  const kiln::Tensor grads = kiln::host_tensor({10}, kiln::DType::f32);
  r.comm->barrier();
  r.comm->all_reduce(grads, kiln::ReduceOp::max)->wait();
  {
    const kiln::train::CollectivePurpose purpose("gradients, bucket", 2);
    r.comm->all_reduce(grads, kiln::ReduceOp::sum)->wait();
  }
  r.fake->fail_next = "peer \"rank 0\" closed\nthe connection \xe9";  // quotes, a newline, a Latin-1 byte
  BOOST_CHECK_THROW(r.comm->all_gather(kiln::host_tensor({4}, kiln::DType::f32), grads)->wait(), kiln::CommError);
  auto pending = r.comm->broadcast(kiln::host_tensor({3}, kiln::DType::i64), 1);  // never waited for
  r.recorder->write_into(dir.path / "debug");
  const std::string reason = "SIGSEGV (invalid memory access at 0x0) during a call into data plugin 'csv'";
  r.recorder->on_fatal_signal(reason);

  const fs::path file = dir.path / "debug" / "rank1.json";
  BOOST_TEST_REQUIRE(fs::is_regular_file(file));
  BOOST_TEST(!fs::exists(file.string() + ".tmp"));
  std::ifstream in(file, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RankTrace expected = r.recorder->snapshot(reason);
  const RankTrace back = kiln::train::parse_rank_trace(written, file.string());
  expected.written_ms = back.written_ms;  // the one field read from the clock at another moment
  BOOST_TEST(written == kiln::train::to_json(expected));
  BOOST_TEST(back.issued == 5);
  BOOST_TEST_REQUIRE(back.entries.size() == 3u);
  BOOST_TEST(back.entries[0].purpose == "gradients, bucket 2");
  BOOST_TEST(back.entries[1].error == "peer \"rank 0\" closed\nthe connection \u00e9");
  BOOST_TEST(back.entries[2].signature() == "broadcast(root 1) i64 x 3");
  BOOST_TEST(std::abs(back.written_ms - kiln::train::wall_clock_ms()) < 60'000);
  // It was the first dump: a later one (the SIGTERM that follows, say) writes nothing.
  BOOST_TEST(r.recorder->dump("received SIGTERM").empty());
}

BOOST_AUTO_TEST_CASE(nothing_is_written_on_a_fatal_signal_before_the_run_directory_is_known) {
  TempDir dir;
  Recording r(4);
  r.comm->barrier();
  r.recorder->on_fatal_signal("SIGABRT");
  BOOST_TEST(fs::is_empty(dir.path));
  r.recorder->write_into(dir.path);  // an ordinary dump still can
  BOOST_TEST(!r.recorder->dump("collective #2 timed out").empty());
}

BOOST_AUTO_TEST_CASE(a_crash_writes_the_record_and_still_ends_the_process_by_its_signal) {
  TempDir dir;
  const pid_t pid = ::fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    // The test runner's own handler would keep the report's away. SIGABRT rather than SIGSEGV:
    // a sanitizer build may hold on to SIGSEGV, and the path through the handler is the same.
    ::signal(SIGABRT, SIG_DFL);
    kiln::crash::install_fatal_signal_report();
    Recording r(4);
    r.comm->all_reduce(kiln::host_tensor({5}, kiln::DType::f32), kiln::ReduceOp::sum)->wait();
    r.recorder->write_into(dir.path / "debug");
    ::raise(SIGABRT);
    ::_exit(3);  // not reached: the handler lets the signal end the process
  }
  int status = 0;
  BOOST_TEST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_TEST((WIFSIGNALED(status) ? WTERMSIG(status) : -1) == SIGABRT);
  const auto set = kiln::train::read_traces(dir.path / "debug");
  BOOST_TEST_REQUIRE(set.traces.size() == 1u);
  BOOST_TEST(set.traces[0].reason.rfind("SIGABRT (aborted", 0) == 0, set.traces[0].reason);
  BOOST_TEST(set.traces[0].pid == pid);
  BOOST_TEST_REQUIRE(set.traces[0].entries.size() == 1u);
  BOOST_TEST(set.traces[0].entries[0].completed());
}

BOOST_AUTO_TEST_CASE(names_the_rank_that_never_issued_what_the_others_wait_in) {
  TempDir dir;
  write(dir.path, trace(0, 3, 5, 4));  // waiting in #5
  write(dir.path, trace(1, 3, 5, 4));
  RankTrace slow = trace(2, 3, 4, 4, "bad magic number in rows.csv");  // never issued #5
  slow.written_ms = 1'001'000;
  write(dir.path, slow);
  const std::string v = verdict_of(dir.path);
  BOOST_TEST(contains(v, "rank 2 never issued collective #5 all_reduce(sum) f32 x 100"));
  BOOST_TEST(contains(v, "which ranks 0, 1 waited in"));
  BOOST_TEST(contains(v, "had completed every collective it issued (the last #4)"));
  BOOST_TEST(contains(v, "bad magic number in rows.csv"));
}

BOOST_AUTO_TEST_CASE(a_rank_stuck_in_a_collective_its_peers_finished_was_itself_stopped) {
  TempDir dir;
  write(dir.path, trace(0, 2, 6, 5));  // finished #5, waiting in #6
  write(dir.path, trace(1, 2, 5, 4));  // still in #5
  const std::string v = verdict_of(dir.path);
  BOOST_TEST(contains(v, "rank 1 never issued collective #6"));
  BOOST_TEST(contains(v, "Rank 1 was still in #5 all_reduce(sum) f32 x 100, which the ranks ahead had finished"));
}

BOOST_AUTO_TEST_CASE(a_rank_without_a_record_is_the_suspect_when_the_others_all_wait) {
  TempDir dir;
  write(dir.path, trace(0, 3, 5, 4));
  write(dir.path, trace(2, 3, 5, 4));
  const std::string v = verdict_of(dir.path);
  BOOST_TEST(contains(v, "every rank with a record (0, 2) issued collective #5"));
  BOOST_TEST(contains(v, "rank 1 left no record"));
  BOOST_TEST(contains(v, "It is the likely cause"));
}

BOOST_AUTO_TEST_CASE(different_collectives_under_one_number_are_named_first) {
  TempDir dir;
  write(dir.path, trace(0, 2, 4, 3));
  RankTrace other = trace(1, 2, 4, 3);
  other.entries[2] = entry(3, "broadcast(root 0)", 7, true, "rank 0's batch-norm running statistics");
  write(dir.path, other);
  const std::string v = verdict_of(dir.path);
  BOOST_TEST(contains(v, "collective #3 differs across ranks: rank 0 issued all_reduce(sum) f32 x 100"));
  BOOST_TEST(contains(v, "rank 1 issued broadcast(root 0) f32 x 7 (rank 0's batch-norm running statistics"));
}

BOOST_AUTO_TEST_CASE(all_ranks_in_one_collective_blames_the_communicator) {
  TempDir dir;
  RankTrace a = trace(0, 2, 4, 3, "collective timed out");
  a.entries[3].error = "gloo: timed out after 5 s";
  a.entries[3].end_ms = a.entries[3].issued_ms + 5000;
  write(dir.path, a);
  write(dir.path, trace(1, 2, 4, 3));
  const std::string v = verdict_of(dir.path);
  BOOST_TEST(contains(v, "every rank issued collective #4"));
  BOOST_TEST(contains(v, "none completed it"));
  BOOST_TEST(contains(v, "rank 0: gloo: timed out after 5 s"));
  BOOST_TEST(contains(v, "Rank 0 stopped first"));
}

BOOST_AUTO_TEST_CASE(a_job_that_stopped_between_collectives_names_who_stopped_first) {
  TempDir dir;
  RankTrace a = trace(0, 2, 4, 4, "the loss is NaN at epoch 1 step 4");
  a.written_ms = 1'002'000;
  write(dir.path, a);
  write(dir.path, trace(1, 2, 4, 4));
  const std::string v = verdict_of(dir.path);
  BOOST_TEST(contains(v, "no rank was waiting in a collective"));
  BOOST_TEST(contains(v, "Rank 0 stopped first"));
  BOOST_TEST(contains(v, "the loss is NaN"));
}

BOOST_AUTO_TEST_CASE(the_longest_wait_tells_a_hung_job_from_one_stopped_mid_step) {
  TempDir dir;
  write(dir.path, trace(0, 2, 4, 4));  // all completed
  RankTrace waiting = trace(1, 2, 5, 4);
  waiting.written_ms = waiting.entries[4].wait_ms + 2500;  // in #5 for 2.5 s when it wrote
  write(dir.path, waiting);
  BOOST_TEST(kiln::train::longest_wait_ms(kiln::train::read_traces(dir.path)) == 2500);
  write(dir.path, trace(1, 2, 4, 4));
  BOOST_TEST(kiln::train::longest_wait_ms(kiln::train::read_traces(dir.path)) == 0);
}

BOOST_AUTO_TEST_CASE(records_of_an_earlier_attempt_and_damaged_files_are_left_out_with_a_note) {
  TempDir dir;
  RankTrace old = trace(1, 2, 9, 9);
  old.started_ms = 100'000;
  old.written_ms = 200'000;  // long before rank 0's attempt started
  write(dir.path, old);
  write(dir.path, trace(0, 2, 3, 2));
  std::ofstream(dir.path / "rank3.json") << "{\"format\": ";
  const auto set = kiln::train::read_traces(dir.path);
  BOOST_TEST_REQUIRE(set.traces.size() == 1u);
  BOOST_TEST(set.traces[0].rank == 0);
  BOOST_TEST_REQUIRE(set.notes.size() == 2u);
  const std::string notes = set.notes[0] + " | " + set.notes[1];
  BOOST_TEST(contains(notes, "rank 1's record"));
  BOOST_TEST(contains(notes, "rank3.json"));
  BOOST_TEST(contains(kiln::train::verdict(set), "rank 1 left no record"));
}

BOOST_AUTO_TEST_CASE(a_directory_without_records_is_an_error_that_says_when_they_are_written) {
  TempDir dir;
  try {
    kiln::train::read_traces(dir.path / "debug");
    BOOST_FAIL("expected an IoError");
  } catch (const kiln::IoError& e) {
    BOOST_TEST(contains(e.what(), "SIGTERM/SIGINT"));
  }
  try {
    kiln::train::read_traces(dir.path);
    BOOST_FAIL("expected an IoError");
  } catch (const kiln::IoError& e) {
    BOOST_TEST(contains(e.what(), "holds no usable record"));
  }
}


// ---- the early warning (stall_warning.hpp) ----------------------------------------------------

BOOST_AUTO_TEST_CASE(stall_warning_names_the_oldest_wait_once_it_is_long_enough) {
  kiln::train::RankTrace t;
  t.rank = 2;
  kiln::train::CollectiveEntry done, waiting, issued_only;
  done.seq = 7, done.op = "all_reduce(sum)", done.dtype = "f32", done.count = 4, done.wait_ms = 100, done.end_ms = 150;
  waiting = done, waiting.seq = 8, waiting.wait_ms = 1000, waiting.end_ms = -1, waiting.purpose = "loss check";
  issued_only = done, issued_only.seq = 9, issued_only.wait_ms = -1, issued_only.end_ms = -1;
  t.entries = {done, waiting, issued_only};
  const kiln::train::StallWarningOptions o{std::chrono::milliseconds(30000), 300, "runs/x"};
  BOOST_TEST(!kiln::train::stall_warning(t, 30999, o, 0).has_value());  // 29.999 s
  const auto w = kiln::train::stall_warning(t, 31000, o, 0);
  BOOST_TEST_REQUIRE(w.has_value());
  BOOST_TEST(w->first == 8);
  BOOST_TEST(w->second == "rank 2 has waited 30 s in collective #8 all_reduce(sum) f32 x 4 (loss check); it gives up "
                          "after 300 s (dist.timeout_s). To learn now which rank the others wait for, stop the job "
                          "(Ctrl-C, or SIGTERM to every rank: each writes its latest collectives) and run `kiln "
                          "collectives --run-dir runs/x`");
  BOOST_TEST(!kiln::train::stall_warning(t, 99000, o, 8).has_value());  // warned once
}

BOOST_AUTO_TEST_CASE(stall_warning_thread_warns_once_per_collective) {
  auto recorder = std::make_shared<kiln::train::CollectiveRecorder>(8);
  recorder->set_identity(1, 2, "test");
  std::mutex m;
  std::vector<std::string> said;
  {
    kiln::train::StallWarning watch(recorder, {std::chrono::milliseconds(40), 5, "runs/y"}, [&](const std::string& s) {
      const std::lock_guard<std::mutex> lock(m);
      said.push_back(s);
    });
    const auto seq = recorder->issued(kiln::train::CollectiveRecorder::Kind::barrier, kiln::Tensor(), 0);
    recorder->waiting(seq);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    recorder->completed(seq);
  }
  BOOST_TEST_REQUIRE(said.size() == 1u);
  BOOST_TEST(said[0].find("rank 1 has waited ") == 0u, said[0]);
  BOOST_TEST(said[0].find(" s in collective #1 barrier") != std::string::npos, said[0]);
  BOOST_TEST(said[0].find("it gives up after 5 s (dist.timeout_s)") != std::string::npos, said[0]);
}
BOOST_AUTO_TEST_SUITE_END()
