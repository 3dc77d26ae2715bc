// Why std::terminate was called, for the fatal-signal report of the SIGABRT that follows it.
//
// An exception that escapes a thread's function, a noexcept function or a destructor ends the
// process through std::terminate and abort(). The SIGABRT report alone cannot say which
// exception: by then only the signal is left. install_terminate_note() (called by
// install_fatal_signal_report) sets a terminate handler that notes the exception in flight, by
// type and what(), in static storage, then calls the handler it replaced (libstdc++'s prints
// "terminate called after throwing an instance of ..." and aborts). The report then reads
//   kiln: fatal: SIGABRT (std::terminate after an uncaught std::runtime_error: bad row 3)
//         during a call into data plugin 'csv' (libkiln-data-csv.so), read()
// and so does the reason of a multi-rank run's record of collectives (collective_recorder.hpp).
#pragma once

#include <string_view>

namespace kiln::crash {

/// Sets the noting terminate handler (once; later calls do nothing).
void install_terminate_note();

/// What the handler noted, completing "std::terminate ...", or empty if std::terminate was not
/// called: "after an uncaught std::runtime_error: bad row 3", or "with no exception in flight:
/// ...". One line (newlines in what() become spaces), at most 1 KiB. Async-signal-safe: static
/// storage written once.
std::string_view terminate_note() noexcept;

}  // namespace kiln::crash
