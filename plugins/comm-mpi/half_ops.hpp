// MPI reduction operators for f16 and bf16, which MPI does not have.
//
// Each is a user-defined, commutative MPI_Op over MPI_UINT16_T that widens every pair of
// elements to f32, combines them (sum, max or min) and rounds back once (round-to-nearest-even,
// kiln/sdk/half.hpp). That keeps the 16-bit wire size (widening the whole buffer to f32 would
// double the bytes moved) and rounds once per reduction step, as NCCL does for half types.
// MPI then runs its own algorithms with these ops, and every rank gets the same bits because
// f32 addition of two values is commutative.
#pragma once

#include <mpi.h>

#include "kiln/communicator.hpp"
#include "kiln/tensor.hpp"

namespace kiln::mpi_comm {

/// The six operators (f16/bf16 x sum/max/min; avg uses sum), created by the constructor and
/// freed by the destructor, both called with mpi_lock() held and MPI initialised.
class HalfOps {
 public:
  HalfOps();
  ~HalfOps();
  HalfOps(const HalfOps&) = delete;
  HalfOps& operator=(const HalfOps&) = delete;

  /// The MPI_Op for `dtype` (f16 or bf16) and `op` (avg maps to sum).
  MPI_Op get(DType dtype, ReduceOp op) const;

 private:
  MPI_Op ops_[2][3];
};

}  // namespace kiln::mpi_comm
