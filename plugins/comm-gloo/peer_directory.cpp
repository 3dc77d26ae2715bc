// PeerDirectory: process identities, liveness checks and the "rank N is gone" wording (see
// peer_directory.hpp). Everything here runs in an error path: it reads /proc and calls kill(pid, 0)
// and never waits. A process whose exit has begun (PF_EXITING) already counts as gone, because the
// kernel closes its sockets during exit, before it turns into a zombie: that is the moment peers
// see "Connection closed by peer".
#include "peer_directory.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <sstream>

#include <signal.h>
#include <unistd.h>

namespace kiln::gloo_comm {
namespace {

constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::string own_pid_namespace() {
  char link[256] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  return n > 0 ? std::string(link, static_cast<std::size_t>(n)) : std::string();
}

/// The fields of /proc/<pid>/stat after the command name: [0] is the state (field 3).
std::vector<std::string> stat_fields(std::int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  const auto close = line.rfind(')');  // the command name may hold spaces and ')'
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

constexpr std::size_t kStateField = 0;   // field 3
constexpr std::size_t kFlagsField = 6;   // field 9
constexpr std::size_t kStartField = 19;  // field 22

/// True when `text` holds `address` not followed by another port digit.
bool names_address(std::string_view text, std::string_view address) {
  if (address.empty()) return false;
  for (auto at = text.find(address); at != std::string_view::npos; at = text.find(address, at + 1)) {
    const auto end = at + address.size();
    if (end == text.size() || std::isdigit(static_cast<unsigned char>(text[end])) == 0) return true;
  }
  return false;
}

}  // namespace

ProcessIdentity ProcessIdentity::self() {
  ProcessIdentity id;
  id.host = host_name();
  id.pid_namespace = own_pid_namespace();
  id.pid = static_cast<std::int64_t>(::getpid());
  const auto fields = stat_fields(id.pid);
  if (fields.size() > kStartField) id.start_ticks = fields[kStartField];
  return id;
}

std::vector<std::uint8_t> ProcessIdentity::encode() const {
  const std::string text = fmt::format("{}\t{}\t{}\t{}", host, pid_namespace, pid, start_ticks);
  return {text.begin(), text.end()};
}

ProcessIdentity ProcessIdentity::decode(const std::vector<std::uint8_t>& bytes) {
  std::vector<std::string> parts(1);
  for (const auto b : bytes) {
    if (b == '\t') parts.emplace_back();
    else parts.back().push_back(static_cast<char>(b));
  }
  ProcessIdentity id;
  if (parts.size() != 4) return id;
  id.host = parts[0];
  id.pid_namespace = parts[1];
  try {
    id.pid = std::stoll(parts[2]);
  } catch (...) {
    id.pid = 0;
  }
  id.start_ticks = parts[3];
  return id;
}

PeerDirectory::PeerDirectory(int self, std::vector<ProcessIdentity> processes, std::vector<std::string> addresses)
    : self_(self), own_(ProcessIdentity::self()), processes_(std::move(processes)), addresses_(std::move(addresses)) {}

Liveness PeerDirectory::liveness(int r) const {
  if (r == self_) return Liveness::alive;
  if (r < 0 || static_cast<std::size_t>(r) >= processes_.size()) return Liveness::unknown;
  const ProcessIdentity& p = processes_[static_cast<std::size_t>(r)];
  // Pids mean something only within one pid namespace of one host (containers share hostnames).
  if (p.pid <= 0 || p.host != own_.host || p.pid_namespace.empty() || p.pid_namespace != own_.pid_namespace) {
    return Liveness::unknown;
  }
  const auto fields = stat_fields(p.pid);
  if (fields.size() > kStartField) {
    const std::string& state = fields[kStateField];
    if (state == "Z" || state == "X" || state == "x") return Liveness::gone;
    unsigned long flags = 0;
    try {
      flags = std::stoul(fields[kFlagsField]);
    } catch (...) {
    }
    if ((flags & kPfExiting) != 0) return Liveness::gone;
    if (!p.start_ticks.empty() && fields[kStartField] != p.start_ticks) return Liveness::gone;  // pid reused
    if (state == "T" || state == "t") return Liveness::stopped;
    return Liveness::alive;
  }
  // No /proc entry to read: ask the kernel directly.
  if (::kill(static_cast<pid_t>(p.pid), 0) == 0 || errno == EPERM) return Liveness::alive;
  return errno == ESRCH ? Liveness::gone : Liveness::unknown;
}

std::string PeerDirectory::explain(std::string_view gloo_message) const {
  // Gone ranks are certain and say everything; the address only helps when none was found (a
  // peer on another host), because survivors close their connections too once they fail.
  std::string gone, stopped, connection;
  const auto add = [](std::string& to, const std::string& clause) { to += (to.empty() ? "" : "; ") + clause; };
  for (int r = 0; r < static_cast<int>(processes_.size()); ++r) {
    if (r == self_) continue;
    const ProcessIdentity& p = processes_[static_cast<std::size_t>(r)];
    const Liveness live = liveness(r);
    const std::string& address = static_cast<std::size_t>(r) < addresses_.size() ? addresses_[static_cast<std::size_t>(r)] : std::string();
    if (live == Liveness::gone) {
      add(gone, fmt::format("rank {} is gone (its process {} on host {} no longer exists)", r, p.pid, p.host));
    } else if (live == Liveness::stopped) {
      add(stopped, fmt::format("rank {} is stopped (its process {} on host {} is stopped by a signal or a debugger "
                               "and makes no progress)",
                               r, p.pid, p.host));
    } else if (names_address(gloo_message, address)) {
      add(connection,
          live == Liveness::alive
              ? fmt::format("the failing connection is to rank {} at {} (its process {} on host {} is still running)",
                            r, address, p.pid, p.host)
              : fmt::format("the failing connection is to rank {} at {} (process {} on host {}, which this host "
                            "cannot check)", r, address, p.pid, p.host.empty() ? "?" : p.host));
    }
  }
  // A stopped rank comes first: the others fail because of it, and a survivor that failed
  // first (and so is "gone" by now) is only its consequence.
  if (!stopped.empty() || !gone.empty()) return stopped + (stopped.empty() || gone.empty() ? "" : "; ") + gone;
  return connection;
}

}  // namespace kiln::gloo_comm
