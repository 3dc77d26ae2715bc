// A last word before a crash ends the process.
//
// install_fatal_signal_report() (called once by `kiln`'s main) handles SIGSEGV, SIGBUS, SIGILL,
// SIGFPE and SIGABRT: the handler writes what kiln/crash/crash_context.hpp recorded to stderr,
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
#pragma once

namespace kiln::crash {

/// Installs the handler for the five fatal signals. Signals whose disposition is not the default
/// (a sanitizer's, an embedding program's) are left alone; a debugger sees the signal first anyway.
void install_fatal_signal_report();

}  // namespace kiln::crash
