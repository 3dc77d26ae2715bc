// bias_grad: db(N) (+)= sum over the M rows of dy(M, N), f32.
// Rows are summed in order into db (a parameter gradient, so usually Accumulate::yes), which
// keeps the inner loop a contiguous SIMD add; large problems split the columns among threads so
// no two threads write the same db element and no scratch buffer is needed.
#include <algorithm>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {

void CpuBackend::bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) {
  const OpCheck check(Op::bias_grad);
  check.usable("db", db).usable("dy", dy).dtype("db", db, DType::f32).dtype("dy", dy, DType::f32);
  check.rank("dy", dy, 2).shape("db", db, {dy.dim(1)});
  const std::int64_t m = dy.dim(0), n = dy.dim(1);
  float* out = db.data_as<float>();
  const float* in = dy.data_as<float>();
  if (acc == Accumulate::no) std::fill(out, out + n, 0.0f);
  use_our_threads();
  constexpr std::int64_t kBlock = 256;  // columns per task: 1 KiB of db, many cache lines of dy
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const auto sum_block = [&](std::int64_t blk) {
    const std::int64_t j0 = blk * kBlock, j1 = std::min(n, j0 + kBlock);
    for (std::int64_t i = 0; i < m; ++i) {
      const float* row = in + i * n;
#pragma omp simd
      for (std::int64_t j = j0; j < j1; ++j) out[j] += row[j];
    }
  };
  if (m * n > kParallelMinElements && blocks > 1) {
#pragma omp parallel for schedule(static)
    for (std::int64_t blk = 0; blk < blocks; ++blk) sum_block(blk);
  } else {
    for (std::int64_t blk = 0; blk < blocks; ++blk) sum_block(blk);
  }
}

}  // namespace kiln::cpu
