// The self-pipe behind RecordOnStopSignal (see record_on_signal.hpp).
#include "kiln/train/record_on_signal.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "kiln/errors.hpp"
#include "kiln/sdk_internal/log_setup.hpp"

namespace kiln::train {
namespace {

std::atomic<int> g_write_end{-1};

extern "C" void note_stop_signal(int sig) {
  const int saved = errno;
  const int fd = g_write_end.load(std::memory_order_relaxed);
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (fd >= 0) (void)!::write(fd, &byte, 1);
  errno = saved;
}

bool install(int sig, struct sigaction& old) {
  if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) return false;
  struct sigaction act {};
  act.sa_handler = note_stop_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;  // the interrupted thread's blocking calls go on until the record is out
  return ::sigaction(sig, &act, nullptr) == 0;
}

}  // namespace

RecordOnStopSignal::RecordOnStopSignal(std::function<void(const std::string&)> record) : record_(std::move(record)) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("cannot create a pipe for the stop-signal record: {}", ::strerror(errno)));
  }
  g_write_end.store(pipe_[1]);
  watcher_ = std::thread([this] { watch(); });
  installed_term_ = install(SIGTERM, old_term_);
  installed_int_ = install(SIGINT, old_int_);
}

RecordOnStopSignal::~RecordOnStopSignal() {
  if (installed_term_) ::sigaction(SIGTERM, &old_term_, nullptr);
  if (installed_int_) ::sigaction(SIGINT, &old_int_, nullptr);
  const unsigned char stop = 0;
  (void)!::write(pipe_[1], &stop, 1);
  watcher_.join();
  g_write_end.store(-1);
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void RecordOnStopSignal::watch() {
  // This thread must be able to receive the signal it re-sends below.
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGTERM);
  sigaddset(&both, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &both, nullptr);
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = ::read(pipe_[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1 || byte == 0) return;
    const int sig = byte;
    const char* abbrev = ::sigabbrev_np(sig);
    try {
      record_(fmt::format("received SIG{}", abbrev ? abbrev : "?"));
    } catch (const std::exception& e) {  // the signal still ends the process
      log::get("kiln")->warn("on SIG{}: {}", abbrev ? abbrev : "?", e.what());
    }
    log::flush();  // the log's buffered debug lines too: the signal ends the process without exit()
    // Do what the signal would have done without this handler (by default: end the process).
    ::sigaction(sig, sig == SIGTERM ? &old_term_ : &old_int_, nullptr);
    ::kill(::getpid(), sig);
    return;
  }
}

}  // namespace kiln::train
