// A last word before a crash ends the process.
//
// install_fatal_signal_report() (called once by `kiln`'s main) handles SIGSEGV, SIGBUS, SIGILL,
// SIGFPE and SIGABRT (and sets the terminate handler that says which exception an abort() by
// std::terminate came from, kiln/crash/terminate_note.hpp): the handler writes what
// kiln/crash/crash_context.hpp recorded to stderr,
//   kiln: fatal: SIGSEGV (invalid memory access at 0x0) during a call into data plugin 'csv'
//         (libkiln-data-csv.so), read()
//   kiln: it happened while training, epoch 2/10, step 17/938
//   kiln: checkpoints already written are complete (each is written aside and renamed); the
//         last is runs/x/checkpoints/epoch-0001, and `kiln train --resume auto` continues from it
// (each on one line), and then lets the signal take its default action, so the exit status (128 + signal in a shell,
// "killed by signal" to `--nproc`'s supervisor), core dumps and debuggers are as they were. The
// handler uses only async-signal-safe calls (write, raise) on memory prepared beforehand, and
// runs on an alternate stack on the main thread and on the data loader's workers
// (kiln/crash/thread_signal_stack.hpp), so a stack overflow there is reported too.
// A second crash while reporting (or one on another thread at the same moment) gets the default
// action at once: the handler is installed with SA_RESETHAND.
//
// After the report, the handler tells one listener (set_fatal_signal_listener): `kiln train`'s
// flight recorder of collectives writes this rank's record there (collective_recorder.hpp), so a
// rank that crashes leaves its last collectives like one that stops on an error.
#pragma once

#include <string_view>

namespace kiln::crash {

/// Told of a fatal signal after the report is on stderr, inside the signal handler: on_fatal_signal
/// must be async-signal-safe (no allocation, no locks it could already hold, no stdio) and
/// noexcept. `what` is the report's first line without "kiln: fatal: " ("SIGSEGV (invalid memory
/// access at 0x0) during a call into data plugin 'csv' (libkiln-data-csv.so), read()"); it lives
/// in static storage until the process ends.
class FatalSignalListener {
 public:
  virtual void on_fatal_signal(std::string_view what) noexcept = 0;

 protected:
  ~FatalSignalListener() = default;
};

/// Makes `listener` the one the handler tells (null: none) and returns the one it replaces.
FatalSignalListener* set_fatal_signal_listener(FatalSignalListener* listener) noexcept;
/// Stops telling `listener`, if it is still the one told; true if it was.
bool clear_fatal_signal_listener(FatalSignalListener* listener) noexcept;

/// Installs the handler for the five fatal signals. Signals whose disposition is not the default
/// (a sanitizer's, an embedding program's) are left alone; a debugger sees the signal first anyway.
void install_fatal_signal_report();

}  // namespace kiln::crash
