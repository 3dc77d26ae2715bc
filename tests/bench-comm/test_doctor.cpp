// `kiln doctor`: the decision (cli/comm_doctor.hpp) with scripted attempts -- what it runs again
// with NCCL_P2P_DISABLE=1, what it does not (a failure before the communicator ran), and what it
// says -- and the real command on the gloo communicator, working and failing. The NCCL cases
// need no GPU: the attempts are scripted.
#define KILN_TEST_MODULE test_doctor
#include "kiln_test_main.hpp"

#include <filesystem>
#include <string>
#include <vector>

#include "cli/comm_doctor.hpp"
#include "../integration/kiln_process.hpp"

namespace {

using kiln::cli::AttemptEnv;
using kiln::cli::CommAttempt;
using kiln::cli::DoctorFacts;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

DoctorFacts facts(const std::string& comm) {
  DoctorFacts f;
  f.comm = comm;
  f.nproc = 4;
  f.deadline_s = 90;
  f.command = "kiln bench-comm --comm " + comm + " ...";
  f.iommu = "the IOMMU is on (12 IOMMU groups)";
  return f;
}

const std::string kPassed = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.25\n#\n";

/// Replies with `script` in turn and records each attempt's environment.
struct Script {
  std::vector<CommAttempt> replies;
  std::vector<AttemptEnv> envs;
  kiln::cli::RunAttempt runner() {
    return [this](const AttemptEnv& env) {
      envs.push_back(env);
      return replies.at(envs.size() - 1);
    };
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_communicator_that_works_is_checked_once) {
  Script s{{{0, false, kPassed}}, {}};
  const auto d = kiln::cli::diagnose_comm(facts("nccl-ring"), s.runner());
  BOOST_TEST(d.exit_code == 0);
  BOOST_TEST(s.envs.size() == 1u);
  BOOST_TEST(d.report == "ok: an all-reduce of 8 B to 4 MB on 4 rank(s) with nccl-ring: every result checked, average "
                         "bus bandwidth 1.25 GB/s\n");
}

BOOST_AUTO_TEST_CASE(nccl_that_hangs_and_works_without_peer_to_peer_points_at_acs) {
  Script s{{{137, true, "# Using devices\n"}, {0, false, kPassed}}, {}};
  const auto d = kiln::cli::diagnose_comm(facts("nccl-ring"), s.runner());
  BOOST_TEST(d.exit_code == 1);  // it does not work as configured
  BOOST_TEST_REQUIRE(s.envs.size() == 2u);
  BOOST_TEST(s.envs[0].empty());
  BOOST_TEST((s.envs[1] == AttemptEnv{{"NCCL_P2P_DISABLE", "1"}}));
  BOOST_TEST(contains(d.report, "failed: an all-reduce of 8 B to 4 MB on 4 rank(s) with nccl-ring: it did not finish "
                                "within 90 s and was stopped (a hang)\n  ran: kiln bench-comm --comm nccl-ring ...\n"),
             d.report);
  BOOST_TEST(contains(d.report, "works without peer-to-peer transfers: the same all-reduce with NCCL_P2P_DISABLE=1 "
                                "passed."),
             d.report);
  BOOST_TEST(contains(d.report, "here the IOMMU is on (12 IOMMU groups)."), d.report);
  BOOST_TEST(contains(d.report, "lspci -vvv | grep -i acsctl"), d.report);
  BOOST_TEST(contains(d.report, "troubleshooting.html#pci-access-control-services-acs"), d.report);
}

BOOST_AUTO_TEST_CASE(nccl_that_fails_both_ways_is_not_blamed_on_peer_to_peer) {
  Script s{{{1, false, "kiln: error: rank 1: NCCL error: unhandled system error\n"},
            {1, false, "x\nkiln: error: rank 0: NCCL error: unhandled system error\n"}},
           {}};
  const auto d = kiln::cli::diagnose_comm(facts("nccl-tree"), s.runner());
  BOOST_TEST(d.exit_code == 1);
  BOOST_TEST(s.envs.size() == 2u);
  BOOST_TEST(contains(d.report, "it failed (exit status 1): rank 1: NCCL error: unhandled system error\n"), d.report);
  BOOST_TEST(contains(d.report, "with NCCL_P2P_DISABLE=1 too: it failed (exit status 1): rank 0: NCCL error"), d.report);
  BOOST_TEST(contains(d.report, "Not a peer-to-peer problem. Rerun with NCCL_DEBUG=INFO"), d.report);
  BOOST_TEST(!contains(d.report, "ACS"), d.report);
}

// Without a GPU the cuda backend fails before NCCL runs: a second attempt without peer-to-peer
// transfers would fail the same way (it did, before), and "not a peer-to-peer problem, rerun with
// NCCL_DEBUG=INFO" sent the user to NCCL for a backend's error.
BOOST_AUTO_TEST_CASE(a_failure_before_the_communicator_is_not_retried_or_blamed_on_it) {
  const std::string no_gpu =
      "kiln: error: backend plugin 'cuda' (/opt/kiln/lib/libkiln-backend-cuda.so): backend 'cuda': no usable CUDA "
      "device (cudaGetDeviceCount: no CUDA-capable device is detected)\n"
      "kiln: error: rank 1 (pid 7 on host vm) exited with status 1; stopped the other rank\n";
  Script s{{{1, false, no_gpu}}, {}};
  const auto d = kiln::cli::diagnose_comm(facts("nccl-ring"), s.runner());
  BOOST_TEST(d.exit_code == 1);
  BOOST_TEST(s.envs.size() == 1u);
  BOOST_TEST(contains(d.report, "it failed (exit status 1): backend plugin 'cuda' "), d.report);
  BOOST_TEST(contains(d.report, "  Not the communicator: the backend plugin failed before any collective ran (the error "
                                "above)."),
             d.report);
  BOOST_TEST(!contains(d.report, "NCCL_P2P_DISABLE"), d.report);
  BOOST_TEST(!contains(d.report, "NCCL_DEBUG"), d.report);

  // The communicator's own errors and hangs may still be peer-to-peer problems.
  BOOST_TEST(kiln::cli::failed_before_the_communicator({1, false, "kiln: error: data plugin 'x' (l.so): read()\n"}) ==
             "the data plugin");
  BOOST_TEST(kiln::cli::failed_before_the_communicator(
                 {1, false, "kiln: error: communicator plugin 'nccl-ring' (l.so), connect(): NCCL error\n"}) == "");
  BOOST_TEST(kiln::cli::failed_before_the_communicator({137, true, "kiln: error: backend plugin 'cuda'\n"}) == "");
}

BOOST_AUTO_TEST_CASE(no_second_attempt_when_peer_to_peer_is_already_off_or_the_comm_is_not_nccl) {
  DoctorFacts off = facts("nccl-ring");
  off.p2p_already_off = true;
  Script nccl{{{1, false, "kiln: error: boom\n"}}, {}};
  const auto d = kiln::cli::diagnose_comm(off, nccl.runner());
  BOOST_TEST(nccl.envs.size() == 1u);
  BOOST_TEST(contains(d.report, "NCCL_P2P_DISABLE=1 was already set"), d.report);

  Script gloo{{{1, false, "kiln: error: gloo rendezvous failed on rank 0 of 2: no such interface\n"}}, {}};
  const auto g = kiln::cli::diagnose_comm(facts("gloo"), gloo.runner());
  BOOST_TEST(g.exit_code == 1);
  BOOST_TEST(gloo.envs.size() == 1u);
  BOOST_TEST(contains(g.report, "it failed (exit status 1): gloo rendezvous failed on rank 0 of 2: no such interface"),
             g.report);
  BOOST_TEST(contains(g.report, "comm.interface"), g.report);
}

BOOST_AUTO_TEST_CASE(an_mpi_failure_gets_mpi_advice_and_no_second_attempt) {
  Script s{{{1, false, "kiln: error: mpi communicator: MPI_Init failed\n"}}, {}};
  const auto d = kiln::cli::diagnose_comm(facts("mpi"), s.runner());
  BOOST_TEST(d.exit_code == 1);
  BOOST_TEST(s.envs.size() == 1u);
  BOOST_TEST(contains(d.report, "ranks\n  must all be started by one mpirun"), d.report);
  BOOST_TEST(contains(d.report, "OMPI_MCA_btl_tcp_if_include"), d.report);
  BOOST_TEST(!contains(d.report, "comm.interface"), d.report);
}

BOOST_AUTO_TEST_CASE(the_failure_line_is_the_cause_and_the_summary_or_the_last_line) {
  BOOST_TEST(kiln::cli::failure_line("a\nkiln: error: first\nb\nkiln: error: second\nc\n") == "first; then: second");
  BOOST_TEST(kiln::cli::failure_line("kiln: error: only\n") == "only");
  BOOST_TEST(kiln::cli::failure_line("a\nlast words\n\n  \n") == "last words");
  BOOST_TEST(kiln::cli::failure_line("") == "(no output)");
}

BOOST_AUTO_TEST_CASE(kiln_doctor_on_gloo_here) {
  const auto& cwd = kiln::test::scratch_dir();
  const auto ok = kiln::test::run_kiln(cwd, {"doctor", "--comm", "gloo", "--nproc", "2", "--timeout", "20"});
  BOOST_TEST(ok.status == 0, ok.out << ok.err);
  BOOST_TEST(contains(ok.out, "kiln doctor: gloo on 2 local rank(s), backend cpu, timeout 20 s\n"), ok.out);
  BOOST_TEST(contains(ok.out, "ok: an all-reduce of 8 B to 4 MB on 2 rank(s) with gloo: every result checked, average "
                              "bus bandwidth "),
             ok.out);

  const auto bad = kiln::test::run_kiln(
      cwd, {"doctor", "--comm", "gloo", "--nproc", "2", "--timeout", "5", "--set", "comm.interface=kiln-no-such0"});
  BOOST_TEST(bad.status == 1, bad.out << bad.err);
  BOOST_TEST(contains(bad.out, "failed: an all-reduce of 8 B to 4 MB on 2 rank(s) with gloo: it failed (exit status 1): "),
             bad.out);
  BOOST_TEST(contains(bad.out, "gloo could not open a TCP device on interface 'kiln-no-such0'"), bad.out);
  BOOST_TEST(contains(bad.out, "; then: rank "), bad.out);  // the supervisor's summary
  BOOST_TEST(contains(bad.out, "  ran: kiln bench-comm --comm gloo --backend cpu --nproc 2 "), bad.out);
}

// The mpi communicator's ranks meet through MPI_COMM_WORLD, so the doctor starts them with
// mpirun (before, it used --nproc and the ranks refused to start: "MPI_COMM_WORLD says rank 0 of
// 1"); without an mpirun on PATH it says so.
BOOST_AUTO_TEST_CASE(kiln_doctor_on_mpi_here_runs_under_mpirun, *boost::unit_test::enable_if<KILN_TEST_HAVE_MPI>()) {
  const auto& cwd = kiln::test::scratch_dir();
  // A PATH whose one directory holds only `env` (run_kiln starts kiln through it).
  const std::string only_env = (cwd / "path-without-mpirun").string();
  const auto none = kiln::test::run_kiln(
      cwd, {"doctor", "--comm", "mpi"},
      "mkdir -p " + only_env + " && ln -sf /usr/bin/env " + only_env + "/env && export PATH=" + only_env);
  BOOST_TEST(none.status == 1, none.out << none.err);
  BOOST_TEST(contains(none.err, "kiln: error: kiln doctor --comm mpi runs its check under mpirun, and there is no "
                                "mpirun on PATH"),
             none.err);
  if (!std::filesystem::exists("/usr/bin/mpirun")) {
    BOOST_TEST_MESSAGE("SKIPPED: /usr/bin/mpirun is not installed (scripts/setup.sh installs openmpi-bin)");
    return;
  }
  const auto ok = kiln::test::run_kiln(cwd, {"doctor", "--comm", "mpi", "--nproc", "2", "--timeout", "20"});
  BOOST_TEST(ok.status == 0, ok.out << ok.err);
  BOOST_TEST(contains(ok.out, "kiln doctor: mpi on 2 rank(s) started by mpirun, backend cpu, timeout 20 s\n"), ok.out);
  BOOST_TEST(contains(ok.out, "ok: an all-reduce of 8 B to 4 MB on 2 rank(s) with mpi: every result checked"), ok.out);
}
