// bias_grad: db(N) f32 (+)= sum over the M rows of dy(M, N) (f32, bf16 or f16: db is a master
// gradient, so it stays f32 whatever the compute dtype).
// Rows are summed in order into db (a parameter gradient, so usually Accumulate::yes), which
// keeps the inner loop a contiguous SIMD add; large problems split the columns among threads so
// no two threads write the same db element and no scratch buffer is needed.
#include <algorithm>

#include "cpu_backend.hpp"
#include "ops/elem.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {

void CpuBackend::bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) {
  sdk::check_bias_grad(OpCheck(Op::bias_grad), db, dy);
  const std::int64_t m = dy.dim(0), n = dy.dim(1);
  float* out = db.data_as<float>();
  if (acc == Accumulate::no) std::fill(out, out + n, 0.0f);
  use_our_threads();
  with_float_dtype(dy.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(dy.data());
    constexpr std::int64_t kBlock = 256;  // columns per task: 1 KiB of db, many cache lines of dy
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    const auto sum_block = [&](std::int64_t blk) {
      const std::int64_t j0 = blk * kBlock, j1 = std::min(n, j0 + kBlock);
      for (std::int64_t i = 0; i < m; ++i) {
        const T* row = in + i * n;
#pragma omp simd
        for (std::int64_t j = j0; j < j1; ++j) out[j] += E::load(row[j]);
      }
    };
    if (m * n > kParallelMinElements && blocks > 1) {
#pragma omp parallel for schedule(static)
      for (std::int64_t blk = 0; blk < blocks; ++blk) sum_block(blk);
    } else {
      for (std::int64_t blk = 0; blk < blocks; ++blk) sum_block(blk);
    }
  });
}

}  // namespace kiln::cpu
