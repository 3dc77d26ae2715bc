// ThreadSignalStack (contract in kiln/crash/thread_signal_stack.hpp).
#include "kiln/crash/thread_signal_stack.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace kiln::crash {
namespace {

// The report is formatted into static memory, so the handler needs little stack: 64 KiB, or what
// the kernel asks for on this CPU if more (AVX-512 state makes a signal frame several KiB; glibc's
// _SC_SIGSTKSZ says how many).
std::size_t signal_stack_size() {
  const long asked = ::sysconf(_SC_SIGSTKSZ);
  return std::max<std::size_t>(64 * 1024, asked > 0 ? static_cast<std::size_t>(asked) : 0);
}

// The lowest address of this thread's stack (0: not noted). initial-exec, as in crash_context.cpp:
// the handler reads it with a plain load from the thread pointer.
[[gnu::tls_model("initial-exec")]] thread_local std::uintptr_t t_stack_low = 0;

// How far below the stack a fault still counts as an overflow: the guard page, or a frame large
// enough to step over it (a function with a big local array) into the unmapped space below.
constexpr std::uintptr_t kOverflowReach = 1024 * 1024;

// Records where the calling thread's stack ends, for is_stack_overflow_fault().
void note_thread_stack() noexcept {
  pthread_attr_t attr;
  if (::pthread_getattr_np(::pthread_self(), &attr) != 0) return;
  void* low = nullptr;
  std::size_t size = 0;
  if (::pthread_attr_getstack(&attr, &low, &size) == 0) t_stack_low = reinterpret_cast<std::uintptr_t>(low);
  ::pthread_attr_destroy(&attr);
}

}  // namespace

bool is_stack_overflow_fault(const void* address) noexcept {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(address);
  const std::uintptr_t low = t_stack_low;
  // One page above the low end too, in case the bounds glibc reports include the guard page.
  return low > kOverflowReach && a < low + 4096 && a >= low - kOverflowReach;
}

ThreadSignalStack::ThreadSignalStack() {
  note_thread_stack();
  const std::size_t size = signal_stack_size();
  void* memory = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (memory == MAP_FAILED) return;
  stack_t alt{};
  alt.ss_sp = memory;
  alt.ss_size = size;
  if (::sigaltstack(&alt, &previous_) != 0) {
    ::munmap(memory, size);
    return;
  }
  memory_ = memory;
  size_ = size;
}

ThreadSignalStack::~ThreadSignalStack() {
  if (memory_ == nullptr) return;
  // The previous one back (or none) before the memory goes: a signal after munmap() would
  // otherwise be delivered onto it.
  ::sigaltstack(&previous_, nullptr);
  ::munmap(memory_, size_);
}

}  // namespace kiln::crash
