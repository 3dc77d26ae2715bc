// `kiln doctor` (see doctor_command.hpp).
#include "doctor_command.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "comm_doctor.hpp"
#include "kiln/errors.hpp"

extern char** environ;

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

std::string quoted(const std::string& s) {
  return s.find_first_of(" \t'\"") == std::string::npos ? s : "'" + s + "'";
}

/// `name` in a directory of PATH, as a shell would find it; empty if it is in none.
fs::path find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t from = 0; from <= dirs.size();) {
    const std::size_t colon = std::min(dirs.find(':', from), dirs.size());
    const fs::path candidate = fs::path(colon == from ? "." : dirs.substr(from, colon - from)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    from = colon + 1;
  }
  return {};
}

/// Whether `mpirun` is Open MPI's (it takes --oversubscribe, --bind-to and --allow-run-as-root;
/// MPICH's takes none of them).
bool is_open_mpi(const fs::path& mpirun) {
  std::error_code ec;
  const fs::path real = fs::canonical(mpirun, ec);
  const std::string name = ec ? mpirun.filename().string() : real.filename().string();
  return name == "orterun" || name == "prterun";
}

/// How the doctor starts the check: `kiln bench-comm --nproc N` (kiln's own supervisor), or for
/// the mpi communicator, whose ranks only MPI can start, `mpirun -np N kiln bench-comm`.
struct Launch {
  fs::path program;
  std::vector<std::string> args;  ///< before bench-comm's own
  std::string how;                ///< "local rank(s)", "rank(s) started by mpirun"
};

Launch launch_for(const std::string& comm, int nproc, const fs::path& kiln) {
  if (comm != "mpi") return {kiln, {}, "local rank(s)"};
  const fs::path mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    throw ConfigError("kiln doctor --comm mpi runs its check under mpirun, and there is no mpirun on PATH: install an "
                      "MPI (scripts/setup.sh installs Open MPI: openmpi-bin)");
  }
  Launch l{mpirun, {"-np", std::to_string(nproc)}, "rank(s) started by mpirun"};
  if (is_open_mpi(mpirun)) {
    // As many ranks as asked, wherever the cores are; Open MPI refuses root without the flag.
    l.args.insert(l.args.end(), {"--oversubscribe", "--bind-to", "none"});
    if (::geteuid() == 0) l.args.emplace_back("--allow-run-as-root");
  }
  l.args.push_back(kiln.string());
  return l;
}

/// Runs `program args` with `extra` added to the environment, stdout and stderr into `log`, and
/// kills it at `deadline` (a hang must not hang the doctor). It stays in the doctor's process
/// group, so Ctrl-C stops it too; the ranks it supervises die with it (PR_SET_PDEATHSIG).
CommAttempt run_child(const fs::path& program, const std::vector<std::string>& args, const AttemptEnv& extra,
                      std::chrono::seconds deadline, const fs::path& log) {
  // Everything exec needs is built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (!extra.count(kv.substr(0, kv.find('=')))) env_text.push_back(kv);
  }
  for (const auto& [k, v] : extra) env_text.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& kv : env_text) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_text = {program.string()};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("kiln doctor cannot write {}: {}", log.string(), std::strerror(errno)));

  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw IoError(fmt::format("kiln doctor cannot start a process: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  CommAttempt a;
  const auto stop_at = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw IoError(fmt::format("kiln doctor lost its child: {}", std::strerror(errno)));
    if (std::chrono::steady_clock::now() >= stop_at) {
      a.timed_out = true;
      // SIGTERM first: kiln's supervisor and mpirun both pass it on to the ranks they started,
      // which a SIGKILL'd mpirun could not. SIGKILL if that has not ended it in 5 s.
      ::kill(pid, SIGTERM);
      const auto grace_until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() >= grace_until) {
          ::kill(pid, SIGKILL);  // kiln's supervisor's ranks follow it (PR_SET_PDEATHSIG)
          ::waitpid(pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  a.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  std::ifstream in(log, std::ios::binary);
  a.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return a;
}

}  // namespace

int run_doctor_command(const std::vector<std::string>& args, const std::vector<fs::path>& plugin_dirs,
                       std::ostream& out) {
  po::options_description opts("kiln doctor options");
  std::string comm, backend;
  int nproc = 2, timeout_s = 30;
  std::vector<std::string> sets;
  opts.add_options()
      ("help,h", "show this help")
      ("comm", po::value(&comm)->required(), "communicator plugin to check (gloo, nccl-ring, nccl-tree, mpi, ...)")
      ("backend", po::value(&backend), "backend whose memory is reduced (default: cuda for nccl-*, else cpu)")
      ("nproc", po::value(&nproc), "ranks to check with (default 2; one per GPU for nccl-*; started by mpirun for mpi)")
      ("timeout", po::value(&timeout_s), "seconds a rendezvous or collective may take (default 30)")
      ("set", po::value(&sets), "communicator parameter, as for bench-comm: --set comm.interface=eth0 (repeatable)");
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln doctor --comm NAME [--nproc N] [--backend NAME] [--timeout S] [--set key=value]...\n\n"
           "Runs a small all-reduce (8 B to 4 MB, every result checked) on N local ranks with a short\n"
           "timeout, and says whether the communicator works here. When an nccl-* communicator fails it\n"
           "tries again with NCCL_P2P_DISABLE=1 and, if that works, points at PCIe ACS and the IOMMU\n"
           "(docs/bench-comm.md#kiln-doctor). The mpi communicator's ranks are started by mpirun.\n"
           "Exit status 0 when it works, 1 when it does not.\n\n"
        << opts;
    return 0;
  }
  po::notify(vm);
  if (nproc < 1) throw po::error("--nproc must be at least 1");
  if (timeout_s < 1) throw po::error("--timeout must be at least 1 second");
  if (backend.empty()) backend = is_nccl_comm(comm) ? "cuda" : "cpu";

  const Launch launch = launch_for(comm, nproc, fs::read_symlink("/proc/self/exe"));
  std::vector<std::string> bench = launch.args;
  bench.insert(bench.end(), {"bench-comm", "--comm", comm, "--backend", backend});
  if (comm != "mpi") bench.insert(bench.end(), {"--nproc", std::to_string(nproc)});
  bench.insert(bench.end(), {"-b", "8", "-e", "4M", "-f", "8", "-n", "3", "-w", "1", "-c", "1", "--timeout",
                             std::to_string(timeout_s), "--warn-after", "0"});
  for (const auto& s : sets) {
    bench.push_back("--set");
    bench.push_back(s);
  }
  for (const auto& d : plugin_dirs) {
    bench.push_back("--plugin-path");
    bench.push_back(fs::absolute(d).string());
  }
  DoctorFacts facts;
  facts.comm = comm;
  facts.nproc = nproc;
  // bench-comm gives up after its own timeout per wait; this is the doctor's net under it.
  const auto deadline = std::chrono::seconds(2 * timeout_s + 30);
  facts.deadline_s = static_cast<double>(deadline.count());
  facts.command = comm == "mpi" ? quoted(launch.program.string()) : "kiln";
  for (const auto& a : bench) facts.command += " " + quoted(a);
  const char* p2p = std::getenv("NCCL_P2P_DISABLE");
  facts.p2p_already_off = p2p != nullptr && std::string(p2p) == "1";
  facts.iommu = iommu_facts();

  std::string log_name = (fs::temp_directory_path() / "kiln-doctor-XXXXXX").string();
  const int log_fd = ::mkstemp(log_name.data());
  if (log_fd < 0) {
    throw IoError(fmt::format("kiln doctor cannot create {}: {}; set TMPDIR to a writable directory", log_name,
                              std::strerror(errno)));
  }
  ::close(log_fd);
  struct RemoveLog {
    fs::path path;
    ~RemoveLog() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove_log{log_name};

  out << fmt::format("kiln doctor: {} on {} {}, backend {}, timeout {} s\n", comm, nproc, launch.how, backend,
                     timeout_s);
  out.flush();
  const Diagnosis d = diagnose_comm(facts, [&](const AttemptEnv& env) {
    return run_child(launch.program, bench, env, deadline, remove_log.path);
  });
  out << d.report;
  return d.exit_code;
}

}  // namespace kiln::cli
