// The fatal-signal handler (contract in kiln/crash/fatal_signal_report.hpp). Everything the
// handler calls is async-signal-safe: it formats into a static buffer by hand (io::BufferOut: no
// snprintf, no fmt, no allocation) and writes it with write(2).
#include "kiln/crash/fatal_signal_report.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kiln/crash/crash_context.hpp"
#include "kiln/crash/terminate_note.hpp"
#include "kiln/crash/thread_signal_stack.hpp"
#include "kiln/io/text_out.hpp"

namespace kiln::crash {
namespace {

using io::BufferOut;

// Static: the handler may run on a small alternate stack. One report per process (SA_RESETHAND).
char g_report_text[16384];

/// The listener to tell after the report (set_fatal_signal_listener), or null.
std::atomic<FatalSignalListener*> g_listener{nullptr};

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

void describe_signal(BufferOut& r, int sig, const siginfo_t* info) {
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(info ? info->si_addr : nullptr);
  switch (sig) {
    case SIGSEGV:
      if (is_stack_overflow_fault(info ? info->si_addr : nullptr)) {
        r << "SIGSEGV (stack overflow: this thread's stack is used up, at ";
        r.hex(address) << "; endless or too deep recursion?)";
      } else {
        r << "SIGSEGV (invalid memory access at ";
        r.hex(address) << ")";
      }
      break;
    case SIGBUS:
      r << "SIGBUS (bus error at ";
      r.hex(address) << ": a memory-mapped file shrank, or a misaligned access)";
      break;
    case SIGILL:
      r << "SIGILL (an instruction this CPU does not have or cannot run: code built for another CPU, -march?)";
      break;
    case SIGFPE:
      r << "SIGFPE (an arithmetic fault, such as an integer division by zero)";
      break;
    case SIGABRT:
      if (const std::string_view why = terminate_note(); !why.empty()) {
        r << "SIGABRT (std::terminate " << why << ")";
      } else {
        r << "SIGABRT (aborted: std::terminate, a failed assertion or abort())";
      }
      break;
    default:
      r << "signal " << static_cast<std::int64_t>(sig);
  }
}

void describe_position(BufferOut& r) {
  const RunPosition p = run_position();
  if (p.phase != nullptr) {
    r << "kiln: it happened while " << p.phase;
    if (p.epoch > 0) r << ", epoch " << p.epoch << "/" << p.epochs;
    if (p.step > 0) r << ", step " << p.step << "/" << p.steps;
    if (p.world > 1) r << " (rank " << p.rank << " of " << p.world << ")";
    r << "\n";
  }
  if (p.last_checkpoint != nullptr) {
    r << "kiln: checkpoints already written are complete (each is written aside and renamed); the last is "
      << p.last_checkpoint << ", and `kiln train --resume auto` continues from it\n";
  } else if (p.epoch > 0) {  // training (kiln eval and predict write none)
    r << "kiln: this run had written no checkpoint yet\n";
  }
}

extern "C" void report_fatal_signal(int sig, siginfo_t* info, void*) {
  // Written to stderr at once when complete, so the lines of a report stay together.
  BufferOut r(g_report_text, sizeof(g_report_text), STDERR_FILENO);
  r << "kiln: fatal: ";
  const std::size_t what_begins = r.text().size();
  describe_signal(r, sig, info);
  if (const PluginCallFrame* call = current_plugin_call()) {
    r << " during a call into " << call->kind << " plugin '" << call->name << "' (" << call->library << "), "
      << call->method << "\n";
  } else {
    r << " outside any call into a model, data, precision or communicator plugin (in kiln's core, the backend "
         "plugin or a library they use)\n";
  }
  // What the listener is told: the first line, without "kiln: fatal: " and the newline.
  const std::size_t what_ends = r.text().size() - 1;
  describe_position(r);
  const std::string_view text = r.text();
  if (FatalSignalListener* listener = g_listener.load()) {
    // Copied aside first: flush() below empties the buffer the view points into.
    static char what[1024];
    const std::size_t n = what_ends > what_begins ? std::min(sizeof(what), what_ends - what_begins) : 0;
    std::memcpy(what, text.data() + what_begins, n);
    r.flush();
    listener->on_fatal_signal(std::string_view(what, n));
  } else {
    r.flush();
  }
  // SA_RESETHAND restored the default action; the signal is blocked until the handler returns,
  // when this one is delivered (a fault would also recur at the faulting instruction).
  ::raise(sig);
}

}  // namespace

FatalSignalListener* set_fatal_signal_listener(FatalSignalListener* listener) noexcept {
  return g_listener.exchange(listener);
}

bool clear_fatal_signal_listener(FatalSignalListener* listener) noexcept {
  return g_listener.compare_exchange_strong(listener, nullptr);
}

void install_fatal_signal_report() {
  install_terminate_note();
  // The main thread's alternate stack, so that a stack overflow there is reported too (the data
  // loader's workers make their own). Never destroyed: it must outlive everything that can crash.
  static const ThreadSignalStack* const main_thread_stack = new ThreadSignalStack;
  (void)main_thread_stack;

  for (const int sig : kFatalSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    const bool is_default = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL;
    if (!is_default) continue;
    struct sigaction act {};
    act.sa_sigaction = report_fatal_signal;
    sigemptyset(&act.sa_mask);
    // SA_ONSTACK: on a thread that has an alternate stack the handler runs there; on one that
    // has none (or where making it failed), on the thread's own stack as usual.
    act.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    ::sigaction(sig, &act, nullptr);
  }
}

}  // namespace kiln::crash
