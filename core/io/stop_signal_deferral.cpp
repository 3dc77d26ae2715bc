// StopSignalDeferral (contract in stop_signal_deferral.hpp).
#include "kiln/io/stop_signal_deferral.hpp"

#include <exception>

namespace kiln::io {
namespace {

// Written only by the handler (async-signal-safe) and read after the handlers are gone.
volatile std::sig_atomic_t g_pending = 0;

extern "C" void record_stop_signal(int sig) {
  if (g_pending == 0) g_pending = sig;
}

/// Installs the recording handler for `sig` unless the signal is ignored now; true if installed.
bool install(int sig, struct sigaction& old) {
  if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) return false;
  struct sigaction act {};
  act.sa_handler = record_stop_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;  // blocking reads and writes of the start go on
  return ::sigaction(sig, &act, nullptr) == 0;
}

}  // namespace

StopSignalDeferral::StopSignalDeferral() : uncaught_at_start_(std::uncaught_exceptions()) {
  g_pending = 0;
  installed_term_ = install(SIGTERM, old_term_);
  installed_int_ = install(SIGINT, old_int_);
}

StopSignalDeferral::~StopSignalDeferral() {
  if (installed_term_) ::sigaction(SIGTERM, &old_term_, nullptr);
  if (installed_int_) ::sigaction(SIGINT, &old_int_, nullptr);
  const int sig = g_pending;
  g_pending = 0;
  if (sig != 0 && std::uncaught_exceptions() == uncaught_at_start_) ::raise(sig);
}

int StopSignalDeferral::pending() noexcept { return g_pending; }

}  // namespace kiln::io
