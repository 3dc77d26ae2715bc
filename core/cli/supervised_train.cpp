// The supervisor of `kiln train --nproc` and its restarts (see supervised_train.hpp).
#include "supervised_train.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/run_dir.hpp"
#include "kiln/io/run_dir_claim.hpp"
#include "kiln/io/run_status.hpp"
#include "kiln/launch/rendezvous_dir.hpp"
#include "kiln/launch/supervisor.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/collective_recorder.hpp"
#include "kiln/train/collective_report.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/run.hpp"
#include "option_args.hpp"

namespace kiln::cli {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxNproc = 1024;
constexpr int kMinNprocLimit = 16;  // so a small machine can still run the usual 2-8 rank tests

/// After a failed job: which rank the others waited for, from the records the ranks wrote
/// (collective_report.hpp). Silent when no rank wrote one (the job failed before training), and
/// after Ctrl-C on a job that was not hung (no rank had waited a second in a collective): the
/// ranks were merely caught at different points of a step.
void explain_collectives(const fs::path& run_dir, std::int64_t job_started_ms, bool interrupted) {
  train::TraceSet set;
  try {
    set = train::read_traces(run_dir / "debug", job_started_ms);
  } catch (const Error&) {
    return;
  }
  if (interrupted && train::longest_wait_ms(set) < 1000) return;
  std::cerr << "kiln: collectives: " << train::verdict(set) << "\n"
            << "kiln: each rank's latest collectives: kiln collectives --run-dir " << run_dir.string() << std::endl;
}

/// A rank 0 that was stopped (by this supervisor's SIGTERM after another rank failed, or from
/// outside) left status.json saying "running", or "interrupted" by that SIGTERM: the job's end is
/// written for it, with the reason this supervisor prints. A "failed" that rank 0 wrote with its
/// own error is kept.
void record_failure_in_status(const fs::path& run_dir, const launch::SuperviseOutcome& outcome) {
  std::optional<io::RunStatus> status = io::read_run_status(run_dir);
  if (!status || (status->state != "running" && status->state != "interrupted")) return;
  status->state = outcome.exit_code == 1 ? "failed" : "interrupted";
  status->message = outcome.message;
  try {
    io::write_run_status(run_dir, *status);
  } catch (const std::exception& e) {
    std::cerr << "kiln: cannot record the failure in " << (run_dir / "status.json").string() << ": " << e.what()
              << std::endl;
  }
}

void check_nproc(int nproc) {
  if (nproc < 1) throw ConfigError(fmt::format("--nproc {} must be at least 1", nproc));
  // Every rank is a process with its own model, buffers and threads: far more of them than cores
  // only thrashes, and a typo (--nproc 100000) would fork until the machine stops responding.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int max_nproc = std::min(kMaxNproc, std::max(kMinNprocLimit, 4 * cores));
  if (nproc > max_nproc) {
    throw ConfigError(fmt::format("--nproc {} is more local ranks than this machine can run: at most {} (4 x its {} "
                                  "cores, at least {}, never more than {}); use fewer ranks, or start ranks on "
                                  "several machines with --rank/--world-size",
                                  nproc, max_nproc, cores, kMinNprocLimit, kMaxNproc));
  }
}

/// The newest checkpoint a restart would continue from, or nothing. Warnings about damaged newer
/// ones are logged by latest_intact_checkpoint, as the ranks' `--resume auto` would.
std::optional<fs::path> checkpoint_to_restart_from(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir / "checkpoints", ec)) return std::nullopt;
  try {
    if (auto latest = train::latest_intact_checkpoint(run_dir / "checkpoints")) return latest->dir;
  } catch (const Error& e) {
    std::cerr << "kiln: cannot read the checkpoints of " << run_dir.string() << ": " << e.what() << std::endl;
  }
  return std::nullopt;
}

}  // namespace

int run_supervised_train(const SupervisedTrain& job) {
  check_nproc(job.nproc);
  if (job.max_restarts < 0) throw ConfigError(fmt::format("--max-restarts {} must be >= 0", job.max_restarts));
  // Only [run] and [dist] are read here; the ranks validate the whole config themselves.
  config::Config cfg = config::Config::load(job.config, job.sets);
  std::string run_dir = job.run_dir;
  if (run_dir.empty()) run_dir = cfg.validate("run", train::run_schema()).get_string("run_dir");
  // A rank stopped for longer than a collective may take fails the job, naming it (supervisor.hpp).
  const double timeout_s = cfg.validate("dist", train::dist_schema()).get_float("timeout_s");
  // Chosen here (a timestamped default must be the same for every rank); rank 0 claims it once
  // the ranks have checked the config and their plugins (run_dir_claim.hpp). A default folder is
  // made here, with the claim's mkdir, so that two jobs started in the same second get their own;
  // it is removed again at the end if no rank wrote into it. Restarts use the same directory.
  // --resume if-any is decided here as the ranks will decide it, on the same directory.
  const std::string resume = train::effective_resume(job.resume, run_dir);
  const io::RunDirMode mode = resume.empty() ? io::RunDirMode::fresh : io::RunDirMode::resume;
  std::vector<fs::path> reserved;  // folders made here, outermost first
  const fs::path dir = [&] {
    if (!run_dir.empty() || mode != io::RunDirMode::fresh) return fs::absolute(io::plan_run_dir(run_dir, mode));
    const io::RunDirClaim claim = io::RunDirClaim::take("", mode);  // its lock ends here: rank 0 takes its own
    for (const fs::path& made : claim.created()) reserved.push_back(fs::absolute(made));
    return fs::absolute(claim.dir());
  }();
  // Only empty folders go (rmdir): a run that wrote anything keeps its directory.
  const struct RemoveIfEmpty {
    const std::vector<fs::path>& folders;
    ~RemoveIfEmpty() {
      for (auto it = folders.rbegin(); it != folders.rend(); ++it) ::rmdir(it->c_str());
    }
  } remove_if_empty{reserved};

  std::vector<std::string> rank_args = {"train"};
  for (const auto& a : without_option(without_option(without_option(job.args, "nproc"), "run-dir"), "max-restarts")) {
    rank_args.push_back(a);
  }
  rank_args.insert(rank_args.end(), {"--run-dir", dir.string()});

  for (int restart = 0;; ++restart) {
    launch::RendezvousDir rendezvous;  // a fresh one per attempt; also removes those of killed supervisors
    launch::SuperviseOptions o;
    o.program = fs::read_symlink("/proc/self/exe");
    o.args = rank_args;
    o.nproc = job.nproc;
    o.rendezvous = "file:" + rendezvous.path().string();
    if (timeout_s > 0 && timeout_s <= 604800) o.stall_limit = std::chrono::milliseconds(std::llround(timeout_s * 1000));
    const std::int64_t started_ms = train::wall_clock_ms();
    const launch::SuperviseOutcome outcome = launch::supervise(o);
    if (outcome.exit_code == 0) {
      if (restart > 0) {
        std::cerr << fmt::format("kiln: the job completed after {} restart{}", restart, restart == 1 ? "" : "s")
                  << std::endl;
      }
      return 0;
    }
    std::cerr << "kiln: error: " << outcome.message << std::endl;
    record_failure_in_status(dir, outcome);
    explain_collectives(dir, started_ms, outcome.exit_code != 1);
    if (job.max_restarts == 0) return outcome.exit_code;
    // 1: a rank failed; anything else: the supervisor itself was interrupted (Ctrl-C, SIGTERM).
    if (outcome.exit_code != 1) {
      std::cerr << "kiln: not restarting: the job was stopped from outside (" << outcome.message << ")" << std::endl;
      return outcome.exit_code;
    }
    if (restart == job.max_restarts) {
      std::cerr << fmt::format("kiln: error: gave up after {} restart{} (--max-restarts {}); the run directory {} "
                               "keeps what every attempt wrote",
                               restart, restart == 1 ? "" : "s", job.max_restarts, dir.string())
                << std::endl;
      return outcome.exit_code;
    }
    const std::optional<fs::path> from = checkpoint_to_restart_from(dir);
    if (!from) {
      std::cerr << fmt::format("kiln: not restarting: {} holds no complete checkpoint to continue from (the job failed "
                               "before writing one: during its start, or in its first epoch; [checkpoint] "
                               "every_epochs and every_steps set how often they are written)",
                               dir.string())
                << std::endl;
      return outcome.exit_code;
    }
    // Every restart continues from the newest checkpoint, whatever the first attempt resumed from.
    rank_args = without_option(rank_args, "resume");
    rank_args.insert(rank_args.end(), {"--resume", "auto"});
    std::cerr << fmt::format("kiln: restarting the {} rank{} (restart {} of {}) from {}", job.nproc,
                             job.nproc == 1 ? "" : "s", restart + 1, job.max_restarts, from->string())
              << std::endl;
  }
}

}  // namespace kiln::cli
