// A stand-in rank for the supervisor tests: does what its arguments say for its RANK.
//
//   launch_child [R=ACTION | *=ACTION]...    (the first entry matching RANK wins; default exit:0)
//   exit:N          exit with status N
//   signal:N        kill itself with signal N
//   sleep:S         sleep S seconds, then exit 0 (SIGTERM ends it, as it would a real rank)
//   stubborn:S      ignore SIGTERM and sleep S seconds (forces the supervisor to SIGKILL)
//   env:DIR         write the launcher variables and argv to DIR/rank<R>.txt, exit 0
//   after-stop:P:N  wait (up to 60 s) until every rank has written its pid and rank P is stopped
//                   (state T in /proc; pids from KILN_TEST_PIDDIR), then exit with status N: a
//                   peer failing because of it (waiting for every pid file keeps the test's pid
//                   list complete: the supervisor stops the others as soon as this rank exits)
// If KILN_TEST_PIDDIR is set it first writes its pid to KILN_TEST_PIDDIR/rank<R>.pid, so a
// test can check that no rank outlives the supervisor.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

void sleep_seconds(int s) {
  for (int i = 0; i < s * 10; ++i) ::usleep(100000);
}

/// Whether the process whose pid is in `pid_file` is stopped (state T in /proc/<pid>/stat).
bool peer_stopped(const std::string& pid_file) {
  std::ifstream in(pid_file);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'T';
}

}  // namespace

int main(int argc, char** argv) {
  const std::string rank = env_or("RANK", "?");
  if (const char* dir = std::getenv("KILN_TEST_PIDDIR")) {
    const std::string file = std::string(dir) + "/rank" + rank + ".pid";
    std::ofstream(file + ".tmp") << ::getpid() << "\n";
    std::rename((file + ".tmp").c_str(), file.c_str());
  }
  std::string action = "exit:0";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (eq == std::string::npos) continue;
    const std::string who = a.substr(0, eq);
    if (who == rank || who == "*") {
      action = a.substr(eq + 1);
      break;
    }
  }
  const auto colon = action.find(':');
  const std::string verb = action.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : action.substr(colon + 1);
  if (verb == "exit") return std::atoi(arg.c_str());
  if (verb == "signal") {
    // Default disposition first: under AddressSanitizer its SIGSEGV handler would otherwise turn
    // the death by signal into "exit 1" after a report.
    const int sig = std::atoi(arg.c_str());
    ::signal(sig, SIG_DFL);
    ::kill(::getpid(), sig);
    ::pause();
  }
  if (verb == "sleep") sleep_seconds(std::atoi(arg.c_str()));
  if (verb == "stubborn") {
    ::signal(SIGTERM, SIG_IGN);
    sleep_seconds(std::atoi(arg.c_str()));
  }
  if (verb == "after-stop") {
    const auto colon2 = arg.find(':');
    const std::string peer = arg.substr(0, colon2);
    const int status = std::atoi(arg.substr(colon2 + 1).c_str());
    const std::string dir = env_or("KILN_TEST_PIDDIR", ".");
    const int world = std::atoi(env_or("WORLD_SIZE", "1").c_str());
    auto all_started = [&] {
      for (int r = 0; r < world; ++r) {
        if (::access((dir + "/rank" + std::to_string(r) + ".pid").c_str(), F_OK) != 0) return false;
      }
      return true;
    };
    const std::string pid_file = dir + "/rank" + peer + ".pid";
    for (int i = 0; i < 600 && !(all_started() && peer_stopped(pid_file)); ++i) ::usleep(100000);
    return status;
  }
  if (verb == "env") {
    std::ofstream out(arg + "/rank" + rank + ".txt");
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "KILN_RENDEZVOUS", "OMP_NUM_THREADS"}) {
      out << name << "=" << env_or(name, "<unset>") << "\n";
    }
    for (int i = 1; i < argc; ++i) out << "arg=" << argv[i] << "\n";
  }
  return 0;
}
