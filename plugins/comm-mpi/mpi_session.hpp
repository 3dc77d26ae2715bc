// MpiSession: this plugin's share of MPI's process-wide initialisation.
//
// The rule shared with core/dist_mpi (the `mpi` rendezvous): check MPI_Initialized; if nobody
// has started MPI, start it, and whoever started it finalises it. Here that is the last live
// session of this plugin (a reference count), not an atexit handler: the plugin is a dlopen()ed
// library and an atexit function inside it could outlive its code. The plugin asks for
// MPI_THREAD_SERIALIZED, the least it needs: its MPI calls come from two threads (the one that
// connects and its MPI thread, comm_thread.hpp), never two at once, because every MPI call of
// the plugin holds mpi_lock(). If MPI was started by someone else with less than that, the
// session refuses with a message saying so.
#pragma once

#include <mutex>
#include <string>

namespace kiln::mpi_comm {

class MpiSession {
 public:
  /// Initialises MPI if nobody has (throws CommError when that fails or the thread level is
  /// too low, or when MPI has already been finalised).
  MpiSession();
  /// Finalises MPI when this plugin started it and this is its last session.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  /// "Open MPI v4.1.4" (MPI_Get_library_version's first line).
  static std::string library_version();
};

/// Held around every MPI call of the plugin (see MPI_THREAD_SERIALIZED above).
std::mutex& mpi_lock();

/// MPI's text for an error code.
std::string mpi_error_text(int code);

}  // namespace kiln::mpi_comm
