// test_crash_report: a crash inside plugin code (a data source's read() dereferencing a null
// pointer, on a loader worker thread) ends `kiln train` with the signal's own exit status, after
// a report on stderr that names the signal (for an abort by std::terminate, the exception that
// caused it), the plugin call, the run's position and the last complete checkpoint, which stays
// whole; in a multi-rank run the crashed rank also leaves its record of collectives, which the
// supervisor's finding quotes. Not in the sanitizer job: there the sanitizer's own SIGSEGV
// handler reports instead (fatal_signal_report.hpp leaves a handler it finds alone).
#define KILN_TEST_MODULE test_crash_report
#include "kiln_test_main.hpp"

#include <csignal>

#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::fixture_dir;
using kiln::test::run_kiln;
using kiln::test::scratch_dir;

/// Two epochs of the mlp on a crashing fixture source (32 samples, 8 steps per epoch), a
/// checkpoint after each epoch.
kiln::test::KilnResult train_on_crashing(const std::string& data_plugin, const fs::path& run_dir) {
  return run_kiln(scratch_dir(), {"train", "--config", kiln::test::fixture_data_config(data_plugin, 2).string(),
                                  "--plugin-path", fixture_dir(data_plugin).string(), "--run-dir", run_dir.string(),
                                  "--set", "log.level=warn"});
}

// The shell that runs kiln reports a death by signal as 128 + the signal.
constexpr int kKilledBySegv = 128 + SIGSEGV;

BOOST_AUTO_TEST_CASE(a_crash_in_a_plugin_names_the_call_the_position_and_the_last_checkpoint) {
  const fs::path run_dir = scratch_dir() / "run-crashes-in-read";
  const auto r = train_on_crashing("crashes-in-read", run_dir);
  BOOST_TEST(r.status == kKilledBySegv, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: fatal: SIGSEGV (invalid memory access at 0x0) during a call into data plugin "
                        "'crashes-in-read' (libkiln-fixture-crashes-in-read.so), read()\n") != std::string::npos,
             "stderr: " << r.err);
  // The first epoch's 32 reads succeed; the crash is the second epoch's first read.
  BOOST_TEST(r.err.find("kiln: it happened while training, epoch 2/2") != std::string::npos, "stderr: " << r.err);
  const fs::path checkpoint = run_dir / "checkpoints" / "epoch-0001";
  BOOST_TEST(r.err.find("the last is " + checkpoint.string() + ", and `kiln train --resume auto` continues from it") !=
                 std::string::npos,
             "stderr: " << r.err);
  // What was written before the crash is whole: the checkpoint (both files) and the metrics line.
  BOOST_TEST(fs::is_regular_file(checkpoint / "model.safetensors"));
  BOOST_TEST(fs::is_regular_file(checkpoint / "trainer.safetensors"));
  BOOST_TEST(kiln::test::slurp(run_dir / "metrics.jsonl").find("\"epoch\": 1,") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_crash_before_any_checkpoint_says_there_is_none) {
  const auto r = train_on_crashing("crashes-at-once", scratch_dir() / "run-crashes-at-once");
  BOOST_TEST(r.status == kKilledBySegv, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(r.err.find("during a call into data plugin 'crashes-at-once'") != std::string::npos, "stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: it happened while training, epoch 1/2") != std::string::npos, "stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: this run had written no checkpoint yet\n") != std::string::npos, "stderr: " << r.err);
}

BOOST_AUTO_TEST_CASE(a_stack_overflow_on_a_loader_worker_is_reported_too) {
  // The handler runs on the worker's alternate signal stack (kiln/crash/thread_signal_stack.hpp);
  // without one the overflowed thread had no room for it and the process died unreported.
  const auto r = train_on_crashing("overflows-stack", scratch_dir() / "run-overflows-stack");
  BOOST_TEST(r.status == kKilledBySegv, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: fatal: SIGSEGV (stack overflow: this thread's stack is used up, at 0x") !=
                 std::string::npos,
             "stderr: " << r.err);
  BOOST_TEST(r.err.find("during a call into data plugin 'overflows-stack' (libkiln-fixture-overflows-stack.so), "
                        "read()\n") != std::string::npos,
             "stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: it happened while training, epoch 1/2") != std::string::npos, "stderr: " << r.err);
}

// std::terminate ends in abort(); the report names the exception that got there (before, it said
// only "SIGABRT (aborted: std::terminate, a failed assertion or abort())").
BOOST_AUTO_TEST_CASE(an_exception_through_a_noexcept_function_is_named_in_the_report) {
  const auto r = train_on_crashing("terminates-in-read", scratch_dir() / "run-terminates-in-read");
  BOOST_TEST(r.status == 128 + SIGABRT, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: fatal: SIGABRT (std::terminate after an uncaught std::runtime_error: the fixture's "
                        "read() threw through a noexcept function on two lines) during a call into data plugin "
                        "'terminates-in-read' (libkiln-fixture-terminates-in-read.so), read()\n") != std::string::npos,
             "stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: it happened while training, epoch 1/2") != std::string::npos, "stderr: " << r.err);
}

BOOST_AUTO_TEST_CASE(a_crashed_rank_leaves_its_collectives_and_the_finding_names_its_crash,
                     *boost::unit_test::enable_if<KILN_TEST_HAVE_GLOO>()) {
  // Rank 1 crashes at its second epoch's first read; rank 0 waits for it in that step's gradients.
  const fs::path run_dir = scratch_dir() / "run-crashes-on-rank-1";
  const auto r = run_kiln(scratch_dir(),
                          {"train", "--config", kiln::test::fixture_data_config("crashes-on-rank-1", 2).string(),
                           "--plugin-path", fixture_dir("crashes-on-rank-1").string(), "--run-dir", run_dir.string(),
                           "--nproc", "2", "--set", "comm.type=\"gloo\"", "--set", "log.level=warn"});
  BOOST_TEST(r.status == 1, "exit status " << r.status << ", stderr: " << r.err);
  const fs::path record = run_dir / "debug" / "rank1.json";
  BOOST_TEST(r.err.find("kiln: this rank's last collectives were written to " + record.string() + "\n") !=
                 std::string::npos,
             "stderr: " << r.err);
  BOOST_TEST(r.err.find("kiln: error: rank 1 (pid ") != std::string::npos, "stderr: " << r.err);
  // Before crashes wrote records the finding said "rank 1 left no record: killed (SIGKILL, the
  // out-of-memory killer), crashed or stopped before it could write one".
  const std::string crash = "SIGSEGV (invalid memory access at 0x0) during a call into data plugin "
                            "'crashes-on-rank-1' (libkiln-fixture-crashes-on-rank-1.so), read()";
  BOOST_TEST(r.err.find("kiln: collectives: rank 1 never issued collective #") != std::string::npos,
             "stderr: " << r.err);
  BOOST_TEST(r.err.find("while training, epoch 2/2: " + crash) != std::string::npos, "stderr: " << r.err);
  BOOST_TEST(r.err.find("left no record") == std::string::npos, "stderr: " << r.err);
  BOOST_TEST(!fs::exists(record.string() + ".tmp"));
  // Both logs hold what the ranks said before the end: the crashed rank's and the one the
  // supervisor stopped with SIGTERM (both were empty while info lines waited in a buffer).
  for (const char* log : {"rank0.log", "rank1.log"}) {
    const std::string text = kiln::test::slurp(run_dir / "logs" / log);
    BOOST_TEST(text.find("| world 2 | rank ") != std::string::npos, log << ": " << text);
  }
  BOOST_TEST(kiln::test::slurp(run_dir / "logs" / "rank0.log")
                 .find("checkpoint written: " + (run_dir / "checkpoints" / "epoch-0001").string()) != std::string::npos);

  const auto listed = run_kiln(scratch_dir(), {"collectives", "--run-dir", run_dir.string()});
  BOOST_TEST(listed.status == 0, "stderr: " << listed.err);
  BOOST_TEST(listed.out.find("rank 1 (pid ") != std::string::npos, "stdout: " << listed.out);
  BOOST_TEST(listed.out.find("): " + crash + " at ") != std::string::npos, "stdout: " << listed.out);
}

}  // namespace
