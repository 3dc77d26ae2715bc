// The crash context's storage (contract in kiln/crash/crash_context.hpp).
#include "kiln/crash/crash_context.hpp"

#include <atomic>
#include <cstring>

namespace kiln::crash {
namespace {

// Static TLS (initial-exec): libkiln_core is linked by the executable, never dlopen()ed, and
// reading an initial-exec variable is a plain load from the thread pointer, which a signal
// handler may do. The general-dynamic model would go through __tls_get_addr, which can allocate.
[[gnu::tls_model("initial-exec")]] thread_local const PluginCallFrame* t_innermost = nullptr;

std::atomic<const char*> g_phase{nullptr};
std::atomic<std::int64_t> g_epoch{0}, g_epochs{0}, g_step{0}, g_steps{0}, g_rank{0}, g_world{1};

// Two buffers: set_last_checkpoint writes the one not published, then publishes it, so a handler
// reading the published one never sees a half-written path. (Checkpoints are written by one
// thread at a time, so writers do not race each other.)
constexpr std::size_t kPathBytes = 4096;
char g_checkpoint_text[2][kPathBytes];
std::atomic<int> g_checkpoint_index{-1};

static_assert(std::atomic<const char*>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free,
              "the crash context is read from a signal handler");

}  // namespace

PluginCallScope::PluginCallScope(std::string_view kind, std::string_view name, std::string_view library,
                                 std::string_view method) noexcept
    : frame_{kind, name, library, method, t_innermost} {
  t_innermost = &frame_;
  // The handler runs on this thread: only the compiler must not sink the store past the call.
  std::atomic_signal_fence(std::memory_order_release);
}

PluginCallScope::~PluginCallScope() {
  std::atomic_signal_fence(std::memory_order_release);
  t_innermost = frame_.outer;
}

const PluginCallFrame* current_plugin_call() noexcept {
  std::atomic_signal_fence(std::memory_order_acquire);
  return t_innermost;
}

void set_phase(const char* phase) noexcept { g_phase.store(phase, std::memory_order_relaxed); }

PhaseScope::PhaseScope(const char* phase) noexcept
    : previous_(g_phase.exchange(phase, std::memory_order_relaxed)) {}

PhaseScope::~PhaseScope() { g_phase.store(previous_, std::memory_order_relaxed); }

void set_epoch(std::int64_t epoch, std::int64_t epochs) noexcept {
  g_epoch.store(epoch, std::memory_order_relaxed);
  g_epochs.store(epochs, std::memory_order_relaxed);
  g_step.store(0, std::memory_order_relaxed);
}

void set_step(std::int64_t step, std::int64_t steps) noexcept {
  g_step.store(step, std::memory_order_relaxed);
  g_steps.store(steps, std::memory_order_relaxed);
}

void set_rank(std::int64_t rank, std::int64_t world) noexcept {
  g_rank.store(rank, std::memory_order_relaxed);
  g_world.store(world, std::memory_order_relaxed);
}

void set_last_checkpoint(std::string_view path) noexcept {
  const int next = g_checkpoint_index.load(std::memory_order_relaxed) == 0 ? 1 : 0;
  char* out = g_checkpoint_text[next];
  const std::string_view ellipsis = "...";
  if (path.size() < kPathBytes) {
    std::memcpy(out, path.data(), path.size());
    out[path.size()] = '\0';
  } else {
    const std::size_t keep = kPathBytes - 1 - ellipsis.size();
    std::memcpy(out, path.data(), keep);
    std::memcpy(out + keep, ellipsis.data(), ellipsis.size());
    out[kPathBytes - 1] = '\0';
  }
  g_checkpoint_index.store(next, std::memory_order_release);
}

RunPosition run_position() noexcept {
  RunPosition p;
  p.phase = g_phase.load(std::memory_order_relaxed);
  p.epoch = g_epoch.load(std::memory_order_relaxed);
  p.epochs = g_epochs.load(std::memory_order_relaxed);
  p.step = g_step.load(std::memory_order_relaxed);
  p.steps = g_steps.load(std::memory_order_relaxed);
  p.rank = g_rank.load(std::memory_order_relaxed);
  p.world = g_world.load(std::memory_order_relaxed);
  const int index = g_checkpoint_index.load(std::memory_order_acquire);
  p.last_checkpoint = index < 0 ? nullptr : g_checkpoint_text[index];
  return p;
}

}  // namespace kiln::crash
