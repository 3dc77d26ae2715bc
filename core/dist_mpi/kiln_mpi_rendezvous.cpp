// The MPI broadcast behind the `mpi` rendezvous (see kiln_mpi_rendezvous.h for why it is a
// separate library and who initialises and finalises MPI).
#include "kiln_mpi_rendezvous.h"

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

void write_error(char* error, std::size_t capacity, const std::string& message) {
  if (capacity == 0) return;
  std::snprintf(error, capacity, "%s", message.c_str());
}

}  // namespace

extern "C" int kiln_mpi_broadcast_from_rank0(const char* text, size_t text_size, int expected_rank, int expected_size,
                                             char* out, size_t out_capacity, size_t* out_size, char* error,
                                             size_t error_capacity) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      write_error(error, error_capacity, "MPI_Init_thread failed: " + mpi_error_text(rc));
      return 1;
    }
    std::atexit(finalize_at_exit);
  }
  // Errors come back as codes instead of aborting the job, so Kiln can name what failed.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = -1;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != expected_rank || size != expected_size) {
    // Every rank checks the same thing, so either all return here or none do.
    write_error(error, error_capacity,
                "MPI_COMM_WORLD says rank " + std::to_string(rank) + " of " + std::to_string(size) +
                    ", but the launcher's variables said rank " + std::to_string(expected_rank) + " of " +
                    std::to_string(expected_size) + "; was this process started by a different mpirun?");
    return 1;
  }
  unsigned long long length = rank == 0 ? text_size : 0;
  int rc = MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) {
    write_error(error, error_capacity, "MPI_Bcast of the store address length failed: " + mpi_error_text(rc));
    return 1;
  }
  if (length > out_capacity || length > static_cast<unsigned long long>(INT32_MAX)) {
    write_error(error, error_capacity, "rank 0 broadcast " + std::to_string(length) + " bytes, more than the " +
                                           std::to_string(out_capacity) + " expected");
    return 1;  // every rank sees the same length, so all return here
  }
  if (rank == 0) std::memcpy(out, text, text_size);
  rc = MPI_Bcast(out, static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) {
    write_error(error, error_capacity, "MPI_Bcast of the store address failed: " + mpi_error_text(rc));
    return 1;
  }
  *out_size = static_cast<std::size_t>(length);
  return 0;
}
