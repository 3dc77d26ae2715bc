// MPI start-up and shut-down for the plugin (see mpi_session.hpp).
#include "mpi_session.hpp"

#include <mpi.h>

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::mpi_comm {
namespace {

int g_sessions = 0;           // live MpiSessions, under mpi_lock()
bool g_we_initialised = false;

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return fmt::format("thread level {}", level);
  }
}

}  // namespace

std::mutex& mpi_lock() {
  static std::mutex m;
  return m;
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(len));
}

MpiSession::MpiSession() {
  const std::lock_guard<std::mutex> lock(mpi_lock());
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    throw CommError("mpi communicator: MPI has already been finalised in this process and cannot be "
                    "started again; create every mpi communicator before the last one is destroyed");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) throw CommError("mpi communicator: MPI_Init_thread failed: " + mpi_error_text(rc));
    g_we_initialised = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    throw CommError(fmt::format(
        "mpi communicator: MPI runs at {}, but the plugin needs MPI_THREAD_SERIALIZED (its "
        "collectives run on a thread of their own); whoever calls MPI_Init "
        "first must ask for MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE",
        thread_level_name(provided)));
  }
  ++g_sessions;
}

MpiSession::~MpiSession() {
  const std::lock_guard<std::mutex> lock(mpi_lock());
  if (--g_sessions > 0 || !g_we_initialised) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiSession::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string out(text, static_cast<std::size_t>(len));
  if (const auto end = out.find_first_of(",\n"); end != std::string::npos) out.resize(end);
  return out;
}

}  // namespace kiln::mpi_comm
