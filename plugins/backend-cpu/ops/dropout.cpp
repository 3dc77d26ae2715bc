// dropout forward/backward, f32/bf16/f16 data (elem.hpp) with a u8 mask.
// mask[i] = unit_float(derive_seed(seed, i)) >= p (kiln/rng.hpp): a pure function of (seed, i),
// so the mask is the same for any thread count and on the cuda backend. Kept elements are scaled
// by 1 / (1 - p) (inverted dropout, as PyTorch). p == 0 is an exact copy with an all-ones mask;
// p must be in [0, 1) because p == 1 would divide by zero.
//
// Forward works in blocks: first the block's mask (dropout_mask.hpp: integer hash and compare,
// vectorised), then the block's outputs from the mask just written, still in L1. One loop doing
// both ran scalar (the 64-bit hash, the u8 mask and the float data in one body): 8 ns per
// element, 28% of the MLP benchmark's step (kiln train --profile).
#include <algorithm>
#include <cstring>

#include "cpu_backend.hpp"
#include "ops/dropout_mask.hpp"
#include "ops/elem.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

// Elements per block: the block's mask and data stay in L1 between the two passes.
constexpr std::int64_t kBlock = 2048;

/// out[j] = keep[j] != 0 ? in[j] * scale : 0 for j < n (forward's output and backward's dx).
template <class E>
void scale_kept(typename E::T* out, const typename E::T* in, const std::uint8_t* keep,
                std::int64_t n, float scale) {
  for (std::int64_t j = 0; j < n; ++j) {
    out[j] = keep[j] != 0 ? E::store(E::load(in[j]) * scale) : E::store(0.0f);
  }
}

/// Runs block(first, count) over [0, n) in kBlock pieces, across the OpenMP team when n is large.
/// Every element's result depends only on its index, so the split never changes the output.
template <class Block>
void for_each_block(std::int64_t n, Block&& block) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  auto one = [&](std::int64_t b) {
    const std::int64_t first = b * kBlock;
    block(first, std::min(kBlock, n - first));
  };
  if (n > kParallelMinElements) {
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) one(b);
  } else {
    for (std::int64_t b = 0; b < blocks; ++b) one(b);
  }
}

}  // namespace

void CpuBackend::dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                                 std::uint64_t seed) {
  sdk::check_dropout_forward(OpCheck(Op::dropout_forward), y, mask, x, p);
  std::uint8_t* keep = mask.data_as<std::uint8_t>();
  const std::int64_t n = x.numel();
  if (p == 0.0f) {
    if (y.data() != x.data()) std::memmove(y.data(), x.data(), x.bytes());
    std::memset(keep, 1, static_cast<std::size_t>(n));
    return;
  }
  const float inv_keep = 1.0f / (1.0f - p);
  const std::uint32_t threshold = dropout_threshold(p);
  use_our_threads();
  with_float_dtype(x.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(y.data());
    const T* in = static_cast<const T*>(x.data());
    for_each_block(n, [&](std::int64_t first, std::int64_t count) {
      fill_dropout_mask(keep + first, first, count, seed, threshold);
      scale_kept<E>(out + first, in + first, keep + first, count, inv_keep);
    });
  });
}

void CpuBackend::dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  sdk::check_dropout_backward(OpCheck(Op::dropout_backward), dx, dy, mask, p);
  const std::uint8_t* keep = mask.data_as<std::uint8_t>();
  const float inv_keep = 1.0f / (1.0f - p);
  use_our_threads();
  with_float_dtype(dy.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(dx.data());
    const T* in = static_cast<const T*>(dy.data());
    for_each_block(dy.numel(), [&](std::int64_t first, std::int64_t count) {
      scale_kept<E>(out + first, in + first, keep + first, count, inv_keep);
    });
  });
}

}  // namespace kiln::cpu
