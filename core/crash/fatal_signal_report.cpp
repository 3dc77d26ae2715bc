// The fatal-signal handler (contract in kiln/crash/fatal_signal_report.hpp). Everything the
// handler calls is async-signal-safe: it formats into a static buffer by hand (no snprintf, no
// fmt, no allocation) and writes it with write(2).
#include "kiln/crash/fatal_signal_report.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string_view>

#include "kiln/crash/crash_context.hpp"
#include "kiln/crash/thread_signal_stack.hpp"

namespace kiln::crash {
namespace {

/// Text appended into a fixed buffer; whatever does not fit is dropped.
class Report {
 public:
  Report& operator<<(std::string_view s) {
    const std::size_t n = s.size() < sizeof(text_) - size_ ? s.size() : sizeof(text_) - size_;
    std::memcpy(text_ + size_, s.data(), n);
    size_ += n;
    return *this;
  }
  Report& operator<<(const char* s) { return *this << std::string_view(s, std::strlen(s)); }
  Report& operator<<(std::int64_t v) {
    char digits[24];
    std::size_t n = 0;
    const bool negative = v < 0;
    std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    do {
      digits[sizeof(digits) - ++n] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (negative) digits[sizeof(digits) - ++n] = '-';
    return *this << std::string_view(digits + sizeof(digits) - n, n);
  }
  Report& hex(std::uintptr_t v) {
    char digits[2 + 2 * sizeof(v)];
    std::size_t n = 0;
    do {
      digits[sizeof(digits) - ++n] = "0123456789abcdef"[v % 16];
      v /= 16;
    } while (v != 0);
    digits[sizeof(digits) - ++n] = 'x';
    digits[sizeof(digits) - ++n] = '0';
    return *this << std::string_view(digits + sizeof(digits) - n, n);
  }
  void write_to_stderr() const {
    std::size_t done = 0;
    while (done < size_) {
      const ssize_t n = ::write(STDERR_FILENO, text_ + done, size_ - done);
      if (n <= 0) return;  // EINTR cannot matter here: nothing else will run
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  char text_[16384];
  std::size_t size_ = 0;
};

Report g_report;  // static: the handler may run on a small alternate stack

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

void describe_signal(Report& r, int sig, const siginfo_t* info) {
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
      r << "SIGABRT (aborted: std::terminate, a failed assertion or abort())";
      break;
    default:
      r << "signal " << static_cast<std::int64_t>(sig);
  }
}

void describe_position(Report& r) {
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
  Report& r = g_report;
  r << "kiln: fatal: ";
  describe_signal(r, sig, info);
  if (const PluginCallFrame* call = current_plugin_call()) {
    r << " during a call into " << call->kind << " plugin '" << call->name << "' (" << call->library << "), "
      << call->method << "\n";
  } else {
    r << " outside any call into a model, data, precision or communicator plugin (in kiln's core, the backend "
         "plugin or a library they use)\n";
  }
  describe_position(r);
  r.write_to_stderr();
  // SA_RESETHAND restored the default action; the signal is blocked until the handler returns,
  // when this one is delivered (a fault would also recur at the faulting instruction).
  ::raise(sig);
}

}  // namespace

void install_fatal_signal_report() {
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
