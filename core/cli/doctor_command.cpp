// `kiln doctor` (see doctor_command.hpp).
#include "doctor_command.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>

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
      ::kill(pid, SIGKILL);  // bench-comm's supervisor; its ranks follow
      ::waitpid(pid, &status, 0);
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
      ("comm", po::value(&comm)->required(), "communicator plugin to check (gloo, nccl-ring, nccl-tree, ...)")
      ("backend", po::value(&backend), "backend whose memory is reduced (default: cuda for nccl-*, else cpu)")
      ("nproc", po::value(&nproc), "local ranks to check with (default 2; one per GPU for nccl-*)")
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
           "(docs/bench-comm.md#kiln-doctor). Exit status 0 when it works, 1 when it does not.\n\n"
        << opts;
    return 0;
  }
  po::notify(vm);
  if (nproc < 1) throw po::error("--nproc must be at least 1");
  if (timeout_s < 1) throw po::error("--timeout must be at least 1 second");
  if (backend.empty()) backend = is_nccl_comm(comm) ? "cuda" : "cpu";

  std::vector<std::string> bench = {"bench-comm", "--comm", comm, "--backend", backend, "--nproc", std::to_string(nproc),
                                    "-b", "8", "-e", "4M", "-f", "8", "-n", "3", "-w", "1", "-c", "1",
                                    "--timeout", std::to_string(timeout_s), "--warn-after", "0"};
  for (const auto& s : sets) {
    bench.push_back("--set");
    bench.push_back(s);
  }
  for (const auto& d : plugin_dirs) {
    bench.push_back("--plugin-path");
    bench.push_back(fs::absolute(d).string());
  }
  const fs::path program = fs::read_symlink("/proc/self/exe");
  DoctorFacts facts;
  facts.comm = comm;
  facts.nproc = nproc;
  // bench-comm gives up after its own timeout per wait; this is the doctor's net under it.
  const auto deadline = std::chrono::seconds(2 * timeout_s + 30);
  facts.deadline_s = static_cast<double>(deadline.count());
  facts.command = "kiln";
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

  out << fmt::format("kiln doctor: {} on {} local rank(s), backend {}, timeout {} s\n", comm, nproc, backend, timeout_s);
  out.flush();
  const Diagnosis d = diagnose_comm(facts, [&](const AttemptEnv& env) {
    return run_child(program, bench, env, deadline, remove_log.path);
  });
  out << d.report;
  return d.exit_code;
}

}  // namespace kiln::cli
