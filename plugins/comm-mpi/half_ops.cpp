// f16/bf16 reduction operators (see half_ops.hpp).
#include "half_ops.hpp"

#include <kiln/sdk/half.hpp>

#include <algorithm>
#include <cstdint>

#include "kiln/errors.hpp"

namespace kiln::mpi_comm {
namespace {

struct F16 {
  static float widen(std::uint16_t h) { return sdk::f16_to_f32(h); }
  static std::uint16_t narrow(float f) { return sdk::f32_to_f16(f); }
};
struct BF16 {
  static float widen(std::uint16_t h) { return sdk::bf16_to_f32(h); }
  static std::uint16_t narrow(float f) { return sdk::f32_to_bf16(f); }
};
struct Sum {
  static float apply(float a, float b) { return a + b; }
};
struct Max {
  static float apply(float a, float b) { return std::max(a, b); }
};
struct Min {
  static float apply(float a, float b) { return std::min(a, b); }
};

// MPI's user-function signature: inout[i] = in[i] (op) inout[i]. Commutative, so the order of
// the operands does not change the bits.
template <class Half, class Op>
void combine(void* in, void* inout, int* len, MPI_Datatype* /*type: always MPI_UINT16_T*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) b[i] = Half::narrow(Op::apply(Half::widen(a[i]), Half::widen(b[i])));
}

int op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return 0;
    case ReduceOp::max: return 1;
    case ReduceOp::min: return 2;
  }
  return 0;
}

}  // namespace

HalfOps::HalfOps() {
  MPI_User_function* const fns[2][3] = {
      {&combine<F16, Sum>, &combine<F16, Max>, &combine<F16, Min>},
      {&combine<BF16, Sum>, &combine<BF16, Max>, &combine<BF16, Min>},
  };
  for (int t = 0; t < 2; ++t) {
    for (int o = 0; o < 3; ++o) {
      const int rc = MPI_Op_create(fns[t][o], /*commute=*/1, &ops_[t][o]);
      if (rc != MPI_SUCCESS) throw CommError("mpi communicator: MPI_Op_create for a 16-bit float reduction failed");
    }
  }
}

HalfOps::~HalfOps() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& row : ops_) {
    for (auto& op : row) MPI_Op_free(&op);
  }
}

MPI_Op HalfOps::get(DType dtype, ReduceOp op) const {
  return ops_[dtype == DType::bf16 ? 1 : 0][op_index(op)];
}

}  // namespace kiln::mpi_comm
