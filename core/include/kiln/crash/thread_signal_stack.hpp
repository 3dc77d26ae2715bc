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

#include <cstddef>

namespace kiln::crash {

class ThreadSignalStack {
 public:
  /// Gives the calling thread an alternate signal stack until this object is destroyed, on the
  /// same thread. If memory or sigaltstack() refuses, the thread simply has none (an overflow then
  /// goes unreported, as before); nothing else depends on it.
  ThreadSignalStack();
  ~ThreadSignalStack();
  ThreadSignalStack(const ThreadSignalStack&) = delete;
  ThreadSignalStack& operator=(const ThreadSignalStack&) = delete;

  /// Whether the thread has this alternate stack now.
  bool installed() const noexcept { return memory_ != nullptr; }

 private:
  void* memory_ = nullptr;
  std::size_t size_ = 0;
};

/// Records where the calling thread's stack ends, for is_stack_overflow_fault(). A
/// ThreadSignalStack does this for its thread; install_fatal_signal_report() for the main thread.
void note_thread_stack() noexcept;

/// Whether `address` (a SIGSEGV's) lies in the guard region just below the calling thread's
/// stack, where a stack overflow faults. Async-signal-safe. False on a thread whose stack was
/// never noted.
bool is_stack_overflow_fault(const void* address) noexcept;

}  // namespace kiln::crash
