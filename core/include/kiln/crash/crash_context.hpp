// What the process is doing, kept where a fatal-signal handler can read it.
//
// A crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) inside plugin code cannot be turned into an
// exception, and without help it ends a run with the shell's bare "Segmentation fault". The
// core records, as it goes, the little a user needs to act on one (fatal_signal_report.hpp
// prints it):
//  - per thread, the plugin call in progress ("data plugin 'csv' (libkiln-data-csv.so), read()"),
//    set by plugin_call() for the length of each call into a guarded plugin object;
//  - for the process, the run's phase and position (training epoch 3/10, step 17/938), this
//    rank's place among the ranks, and the last complete checkpoint.
//
// Everything here is written by ordinary code and read by a signal handler, so the storage is
// lock-free: atomics, a per-thread pointer in static TLS, and two text buffers published by an
// atomic index (a writer never touches the buffer a reader may be reading). Writes cost a few
// relaxed stores; set_last_checkpoint copies a path and is called once per checkpoint.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::crash {

/// One call into a plugin object, for the fatal-signal report. The strings are not copied: they
/// must outlive the call (a PluginOrigin's members and a method literal do).
struct PluginCallFrame {
  std::string_view kind;     ///< "data"
  std::string_view name;     ///< "csv"
  std::string_view library;  ///< "libkiln-data-csv.so"
  std::string_view method;   ///< "read()"
  const PluginCallFrame* outer = nullptr;
};

/// Makes this call this thread's innermost plugin call until the scope ends (the frame lives in
/// the scope object, on the caller's stack).
class PluginCallScope {
 public:
  PluginCallScope(std::string_view kind, std::string_view name, std::string_view library,
                  std::string_view method) noexcept;
  ~PluginCallScope();
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;

 private:
  PluginCallFrame frame_;
};

/// This thread's innermost plugin call, or null (read by the signal handler).
const PluginCallFrame* current_plugin_call() noexcept;

/// What the process is doing, as a phrase that completes "it happened while ..." ("training",
/// "evaluating", "writing a checkpoint"). Must be a string literal (it is kept as a pointer).
void set_phase(const char* phase) noexcept;

/// set_phase() for a nested stretch (a checkpoint inside an epoch), restoring the phase after.
class PhaseScope {
 public:
  explicit PhaseScope(const char* phase) noexcept;
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  const char* previous_;
};

/// The run's position: 1-based epoch of `epochs`, and 1-based step of `steps` (0: between steps).
void set_epoch(std::int64_t epoch, std::int64_t epochs) noexcept;
void set_step(std::int64_t step, std::int64_t steps) noexcept;

/// This process's rank among `world` (reported only when world > 1).
void set_rank(std::int64_t rank, std::int64_t world) noexcept;

/// The newest complete checkpoint directory (what `--resume auto` would pick). Paths longer than
/// the buffer (4 KiB) are kept cut short, marked with "...".
void set_last_checkpoint(std::string_view path) noexcept;

/// A snapshot for the handler; pointers stay valid until the process ends.
struct RunPosition {
  const char* phase = nullptr;  ///< null: no phase recorded (not inside a run)
  std::int64_t epoch = 0, epochs = 0, step = 0, steps = 0, rank = 0, world = 1;
  const char* last_checkpoint = nullptr;  ///< null: none written (or resumed from) by this process
};
RunPosition run_position() noexcept;

}  // namespace kiln::crash
