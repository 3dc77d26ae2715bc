// kiln: the command-line entry point. Dispatches subcommands and turns every error into one
// clear line on stderr and a non-zero exit status (1: the job failed, 2: bad usage).
#include <boost/program_options/errors.hpp>

#include <csignal>
#include <cstdio>
#include <new>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kiln/crash/fatal_signal_report.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk_internal/log_setup.hpp"
#include "kiln/version.hpp"
#include "bench_comm_command.hpp"
#include "bench_data_command.hpp"
#include "collectives_command.hpp"
#include "runs_command.hpp"
#include "doctor_command.hpp"
#include "eval_command.hpp"
#include "predict_command.hpp"
#include "summary_command.hpp"
#include "config_schema_command.hpp"
#include "plugins_command.hpp"
#include "train_command.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kiln <command> [options]\n"
    "\n"
    "commands:\n"
    "  train --config FILE [--set key=value]... [--run-dir DIR]   train a model\n"
    "        [--profile]                                         ... and print a per-op time table (docs/profiling.md)\n"
    "        [--nproc N]                                         ... on N local ranks (docs/distributed.md)\n"
    "  eval --run-dir DIR [--checkpoint DIR] [--json]            evaluate a run's checkpoint on its eval split\n"
    "        [--per-class]                                       ... with precision, recall and F1 of each class\n"
    "  predict --run-dir DIR --output FILE.csv|.jsonl [--top-k K] top-k classes of every eval sample\n"
    "        (both: [--set key=value]...; docs/eval-predict.md)\n"
    "  summary --config FILE [--depth N] [--json]                a config's model: every parameter, its shape, size, what trains\n"
    "  bench-comm --comm NAME [-b 8 -e 64M -f 2] [--nproc N]     all-reduce bandwidth as an nccl-tests table\n"
    "  bench-data --config FILE [-n BATCHES] [--json]            samples/s of a config's input pipeline alone\n"
    "  runs [DIR] [--json]                                       the runs in DIR (default runs/): state, epochs, test accuracy\n"
    "  collectives --run-dir DIR [--last N]                      which rank the others waited for, when a multi-rank run stopped\n"
    "  doctor --comm NAME [--nproc N]                            whether a communicator works here, and why not (NCCL P2P, ACS)\n"
    "  plugins list [--json]                                     list plugins (and libraries that failed)\n"
    "  plugins show NAME [--json]                                a plugin's kind, version, ABI and parameters\n"
    "  plugins check FILE [--json]                               whether kiln loads a plugin library, and finds it\n"
    "  plugins test FILE [--set key=value]...                    any plugin (model, data, comm, backend, precision) against its contract\n"
    "        [--timeout S]                                       ... communicators: the timeout the checks give (default 20 s)\n"
    "  config schema                                             a JSON Schema of the config, for editors\n"
    "  --version                                                 print the version\n"
    "\n"
    "every command accepts --plugin-path DIR (repeatable), searched before KILN_PLUGIN_PATH and\n"
    "the plugins installed next to kiln. `kiln <command> --help` shows a command's options.\n";

/// Pulls every "--plugin-path DIR" / "--plugin-path=DIR" out of args.
std::vector<std::filesystem::path> take_plugin_paths(std::vector<std::string>& args) {
  std::vector<std::filesystem::path> dirs;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--plugin-path") {
      if (i + 1 >= args.size()) throw boost::program_options::error("--plugin-path needs a directory");
      dirs.emplace_back(args[++i]);
    } else if (a.rfind("--plugin-path=", 0) == 0) {
      dirs.emplace_back(a.substr(14));
    } else {
      rest.push_back(a);
    }
  }
  args = std::move(rest);
  return dirs;
}

int dispatch(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "--version" || command == "-V" || command == "version") {
    std::cout << "kiln " << kiln::kVersion << " (plugin ABI " << KILN_ABI_MAJOR << "." << KILN_ABI_MINOR
              << ", toolchain " << kiln::kToolchainKey << ")\n";
    return 0;
  }
  if (command == "train") return kiln::cli::run_train_command(args);
  if (command == "eval") return kiln::cli::run_eval_command(args, std::cout);
  if (command == "predict") return kiln::cli::run_predict_command(args, std::cout);
  if (command == "bench-comm") {
    auto dirs = take_plugin_paths(args);
    return kiln::cli::run_bench_comm_command(args, dirs, std::cout);
  }
  if (command == "bench-data") return kiln::cli::run_bench_data_command(args, std::cout);
  if (command == "summary") return kiln::cli::run_summary_command(args, std::cout);
  if (command == "collectives") return kiln::cli::run_collectives_command(args, std::cout);
  if (command == "runs") return kiln::cli::run_runs_command(args, std::cout);
  if (command == "doctor") {
    auto dirs = take_plugin_paths(args);
    return kiln::cli::run_doctor_command(args, dirs, std::cout);
  }
  if (command == "plugins") {
    auto dirs = take_plugin_paths(args);
    return kiln::cli::run_plugins_command(args, dirs, std::cout);
  }
  if (command == "config") {
    auto dirs = take_plugin_paths(args);
    return kiln::cli::run_config_command(args, dirs, std::cout);
  }
  std::cerr << "kiln: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads (oneDNN's runtime) spin between parallel regions; libgomp's default spin
  // (300k iterations) steals shared cores -- the DataLoader's workers, several ranks on one
  // machine, a parallel test run -- from the thread they wait for (measured, MLP epoch on 2 cores
  // busy with other work: 25 s with 100k spins), while never spinning (OMP_WAIT_POLICY=passive)
  // puts a futex sleep and wake between a step's hundreds of back-to-back regions (ResNet-50
  // bf16, 2 idle cores: 22 vs 25 img/s). 10k spins (tens of microseconds) bridges those gaps and
  // yields soon enough on busy cores (MLP epoch 0.64 s vs 0.75 s passive). libgomp reads this when
  // it is loaded, i.e. when the backend plugin is, after this line; a user's own setting of
  // either variable wins.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("GOMP_SPINCOUNT", "10000", /*overwrite=*/0);
  }
  // A crash in plugin code (or ours) says what was running and where the last checkpoint is,
  // instead of the shell's bare "Segmentation fault" (kiln/crash/fatal_signal_report.hpp).
  kiln::crash::install_fatal_signal_report();
  // UCX, which Open MPI 5 links (and with it Debian 13's Gloo, hence the gloo and mpi plugins),
  // installs its own SIGSEGV/SIGBUS/SIGILL/SIGFPE handler as soon as it is loaded -- when those
  // plugins are, after this line. It printed its backtrace before Kiln's report and re-raised the
  // signal with a siginfo of its own, so the report named a wrong address and missed stack
  // overflows (tests/integration/test_crash_report.cpp on Debian 13). UCX reads this when it is
  // loaded; its 1.20 release makes "none" the default for the same reason. A user's setting wins.
  ::setenv("UCX_HANDLE_ERRORS", "none", /*overwrite=*/0);
  // Past a file-size limit (ulimit -f) a write raises SIGXFSZ, whose default action ends the
  // process without a word; ignored, the write fails with EFBIG instead, and the writer's error
  // names the file (kiln/io/atomic_file.hpp) while what was written before stays whole.
  ::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return dispatch(std::move(args));
  } catch (const kiln::Error& e) {
    kiln::log::flush();
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  } catch (const boost::program_options::error& e) {
    std::fprintf(stderr, "kiln: %s (see kiln --help)\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // A host allocation the core made itself (plugins' and backends' large requests are checked
    // first and say how many bytes they need): still an error about resources, not a bug.
    kiln::log::flush();
    std::fprintf(stderr, "kiln: error: out of host memory: an allocation in kiln's host code could not be met "
                         "(std::bad_alloc); reduce the batch size, the model or the data loader's workers\n");
    return 1;
  } catch (const std::exception& e) {
    kiln::log::flush();
    std::fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return 70;
  } catch (...) {
    // Plugin calls turn any exception into a kiln::Error (kiln/plugin/plugin_call.hpp); this is
    // only the last line of defence against the core's own bugs, better than std::terminate.
    kiln::log::flush();
    std::fprintf(stderr, "kiln: internal error: an exception that is not a std::exception\n");
    return 70;
  }
}
