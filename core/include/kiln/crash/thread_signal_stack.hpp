// An alternate signal stack for one thread, so that a stack overflow on it is reported.
//
// A fatal signal's handler runs on the stack of the thread that faulted. When the fault is that
// thread overflowing its stack, there is no room left to run the handler and the process dies at
// once with the default action: no report (kiln/crash/fatal_signal_report.hpp). A thread that has
// an alternate stack runs the handler there instead. `kiln`'s main thread gets one from
// install_fatal_signal_report(); the threads Kiln starts that run plugin code (the data loader's
// workers, where a data source's read() may recurse on a hostile file) make one of these at their
// start. Threads started by libraries (OpenMP's, oneDNN's, Gloo's) have none. The handler also
// tells a stack overflow from another invalid access by where it faulted (below).
#pragma once

#include <signal.h>

#include <cstddef>

namespace kiln::crash {

class ThreadSignalStack {
 public:
  /// Gives the calling thread an alternate signal stack until this object is destroyed, on the
  /// same thread, which then gets back the one it had before (a sanitizer's, or none). If memory
  /// or sigaltstack() refuses, the thread keeps what it had (an overflow then goes unreported,
  /// as before); nothing else depends on it.
  ThreadSignalStack();
  ~ThreadSignalStack();
  ThreadSignalStack(const ThreadSignalStack&) = delete;
  ThreadSignalStack& operator=(const ThreadSignalStack&) = delete;

 private:
  void* memory_ = nullptr;
  std::size_t size_ = 0;
  stack_t previous_{};
};

/// Whether `address` (a SIGSEGV's) lies in the guard region just below the calling thread's
/// stack, where a stack overflow faults. Async-signal-safe. False on a thread that never made a
/// ThreadSignalStack (which notes where its thread's stack ends).
bool is_stack_overflow_fault(const void* address) noexcept;

}  // namespace kiln::crash
