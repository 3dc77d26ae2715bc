/* libkiln_mpi_rendezvous: the one piece of Kiln's core that calls MPI, built as its own small
 * shared library so that libkiln_core (and with it every plugin and test) has no link-time
 * dependency on MPI. libkiln_core dlopen()s it from its own directory only when a run uses
 * the `mpi` rendezvous (docs/distributed.md), and calls this one C function.
 *
 * MPI is initialised here if nobody has done it yet (MPI_Init_thread, asking for
 * MPI_THREAD_MULTIPLE), and then finalised at exit (atexit), so mpirun sees a clean end. If MPI
 * is already initialised (by a communicator plugin, say) it is used as is and left alone: the
 * rule for everyone in the process is "whoever initialises MPI finalises it". */
#ifndef KILN_MPI_RENDEZVOUS_H
#define KILN_MPI_RENDEZVOUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The name libkiln_core looks up with dlsym. */
#define KILN_MPI_BROADCAST_SYMBOL "kiln_mpi_broadcast_from_rank0"

/* Broadcasts rank 0's `text` (text_size bytes; ignored on other ranks) over MPI_COMM_WORLD and
 * copies what rank 0 sent into `out` (at most out_capacity bytes; the length into *out_size).
 * Checks first that MPI's rank and size equal expected_rank/expected_size (what Kiln resolved
 * from the launcher's variables). Returns 0 on success; otherwise writes a NUL-terminated
 * message of at most error_capacity bytes into `error` and returns non-zero. */
typedef int (*kiln_mpi_broadcast_fn)(const char* text, size_t text_size, int expected_rank, int expected_size,
                                     char* out, size_t out_capacity, size_t* out_size, char* error,
                                     size_t error_capacity);

int kiln_mpi_broadcast_from_rank0(const char* text, size_t text_size, int expected_rank, int expected_size,
                                  char* out, size_t out_capacity, size_t* out_size, char* error,
                                  size_t error_capacity);

#ifdef __cplusplus
}
#endif

#endif
