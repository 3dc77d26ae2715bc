// The job's rendezvous directory and the sweep of ones left by killed supervisors (see
// rendezvous_dir.hpp).
#include "kiln/launch/rendezvous_dir.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "kiln/errors.hpp"

namespace kiln::launch {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "kiln-rendezvous-";
constexpr const char* kOwnerFile = "supervisor";

/// Field 22 of /proc/<pid>/stat (start time in clock ticks), "" if the process is gone.
std::string start_ticks(long pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "";
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return field;
  }
  return "";
}

bool owner_gone(const fs::path& dir) {
  std::ifstream in(dir / kOwnerFile);
  long pid = 0;
  std::string ticks;
  if (!(in >> pid >> ticks) || pid <= 0) return false;  // not ours to judge
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  const std::string now = start_ticks(pid);
  return !now.empty() && now != ticks;  // the pid was reused by another process
}

}  // namespace

int remove_stale_rendezvous_dirs(const fs::path& parent) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path dir = it->path();
    if (dir.filename().string().rfind(kPrefix, 0) != 0) continue;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (!owner_gone(dir)) continue;
    std::error_code rm;
    fs::remove_all(dir, rm);
    if (!rm) ++removed;
  }
  return removed;
}

RendezvousDir::RendezvousDir(const fs::path& parent) {
  remove_stale_rendezvous_dirs(parent);
  std::string pattern = (parent / (std::string(kPrefix) + "XXXXXX")).string();
  if (!::mkdtemp(pattern.data())) {
    throw IoError(fmt::format("cannot create a rendezvous directory {}: set TMPDIR to a writable directory", pattern));
  }
  path_ = pattern;
  const long self = static_cast<long>(::getpid());
  std::ofstream(path_ / kOwnerFile) << self << " " << start_ticks(self) << "\n";
}

RendezvousDir::~RendezvousDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace kiln::launch
