// Kiln's AVX2 kernel for out (+)= a^T b over tall row-major a [M][K] and b [M][C]
// (plugins/backend-cpu/ops/gemm_tn_avx2.cpp, a 1x1 convolution's backward-filter), compiled into
// this test, against a double-precision reference: in each of its ways of splitting the work
// (few rows: threads share the packed panels and split a's columns; many rows: each thread its
// own rows and partial sums; many rows with K > C: the roles swapped and the sum added
// transposed), with 1, 2 and 3 threads, K with no, a 2- and a 4-column partial strip, M that is
// no multiple of the 256-row block (and M = 1), written and accumulated into what out held; a
// and b in f32, and in bf16 and f16 (widened as they are packed: the reference takes the same
// 16-bit values widened); and b as the patch rows of a convolution (gemm_tn_avx2_patches: strided
// 3x3 and 1x1 windows with padding, against an explicit im2col). Exits 77 (CTest: Skipped) on a
// CPU without AVX2, FMA and F16C.
#define KILN_TEST_MODULE test_gemm_tn_avx2
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "kiln/sdk/half.hpp"
#include "ops/gemm_tn_avx2.hpp"

namespace {

struct NeedsAvx2 {
  NeedsAvx2() {
    if (kiln::cpu::cpu_runs_gemm_tn_avx2()) return;
    std::printf("SKIPPED: this CPU has no AVX2, FMA and F16C; Kiln's AVX2 1x1 backward-filter cannot run here\n");
    std::fflush(stdout);
    std::exit(77);
  }
};

using kiln::cpu::GemmInput;

std::vector<float> random_values(std::int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

/// Random values as the kernel's operand: f32, or rounded to bf16 or f16 (`widened` gets the
/// values the 16-bit ones stand for; the reference multiplies those).
struct Operand {
  std::vector<float> widened;
  std::vector<std::uint16_t> half;
  GemmInput type;

  const void* data() const { return type == GemmInput::f32 ? static_cast<const void*>(widened.data()) : half.data(); }
};

Operand random_operand(std::int64_t n, GemmInput type, std::mt19937& rng) {
  Operand o{random_values(n, rng), {}, type};
  if (type == GemmInput::f32) return o;
  o.half.resize(o.widened.size());
  for (std::size_t i = 0; i < o.half.size(); ++i) {
    o.half[i] = type == GemmInput::bf16 ? kiln::sdk::f32_to_bf16(o.widened[i]) : kiln::sdk::f32_to_f16(o.widened[i]);
    o.widened[i] = type == GemmInput::bf16 ? kiln::sdk::bf16_to_f32(o.half[i]) : kiln::sdk::f16_to_f32(o.half[i]);
  }
  return o;
}

/// The largest difference from a double-precision a^T b (+ out0 when accumulating), relative to
/// the largest |value| of the result.
double worst_difference(std::int64_t m, std::int64_t k, std::int64_t c, GemmInput type, int threads, bool accumulate,
                        std::mt19937& rng) {
  const Operand a = random_operand(m * k, type, rng), b = random_operand(m * c, type, rng);
  const std::vector<float> out0 = random_values(k * c, rng);
  std::vector<float> out = out0;
  const std::size_t bytes = kiln::cpu::gemm_tn_scratch_bytes(m, k, c, threads);
  std::unique_ptr<void, decltype(&std::free)> scratch(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64), &std::free);
  kiln::cpu::gemm_tn_avx2(m, k, c, a.data(), type, b.data(), type, out.data(), accumulate, scratch.get(), threads);
  double worst = 0, largest = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    for (std::int64_t j = 0; j < c; ++j) {
      double want = accumulate ? out0[static_cast<std::size_t>(i * c + j)] : 0.0;
      for (std::int64_t r = 0; r < m; ++r) {
        want += static_cast<double>(a.widened[static_cast<std::size_t>(r * k + i)]) *
                b.widened[static_cast<std::size_t>(r * c + j)];
      }
      worst = std::max(worst, std::abs(want - out[static_cast<std::size_t>(i * c + j)]));
      largest = std::max(largest, std::abs(want));
    }
  }
  return worst / largest;
}

/// The same for b the patch rows of a channels-last x [n][h][w][c] under a convolution window:
/// the reference builds the im2col rows explicitly.
double worst_patch_difference(const kiln::cpu::PatchRows& shape, std::int64_t k, GemmInput type, int threads,
                              bool accumulate, std::mt19937& rng) {
  kiln::cpu::PatchRows pr = shape;
  const std::int64_t m = pr.n * pr.out_h * pr.out_w, cols = pr.r * pr.s * pr.c;
  const Operand a = random_operand(m * k, type, rng), x = random_operand(pr.n * pr.h * pr.w * pr.c, type, rng);
  pr.x = x.data(), pr.type = type;
  std::vector<double> b(static_cast<std::size_t>(m * cols), 0.0);  // explicit im2col
  for (std::int64_t row = 0; row < m; ++row) {
    const std::int64_t q = row % pr.out_w, p = (row / pr.out_w) % pr.out_h, n = row / (pr.out_w * pr.out_h);
    for (std::int64_t kh = 0; kh < pr.r; ++kh) {
      for (std::int64_t kw = 0; kw < pr.s; ++kw) {
        const std::int64_t ih = p * pr.stride_h - pr.pad_h + kh, iw = q * pr.stride_w - pr.pad_w + kw;
        if (ih < 0 || ih >= pr.h || iw < 0 || iw >= pr.w) continue;
        for (std::int64_t ch = 0; ch < pr.c; ++ch) {
          b[static_cast<std::size_t>(row * cols + (kh * pr.s + kw) * pr.c + ch)] =
              x.widened[static_cast<std::size_t>(((n * pr.h + ih) * pr.w + iw) * pr.c + ch)];
        }
      }
    }
  }
  const std::vector<float> out0 = random_values(k * cols, rng);
  std::vector<float> out = out0;
  const std::size_t bytes = kiln::cpu::gemm_tn_scratch_bytes(m, k, cols, threads);
  std::unique_ptr<void, decltype(&std::free)> scratch(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64), &std::free);
  kiln::cpu::gemm_tn_avx2_patches(k, a.data(), type, pr, out.data(), accumulate, scratch.get(), threads);
  double worst = 0, largest = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      double want = accumulate ? out0[static_cast<std::size_t>(i * cols + j)] : 0.0;
      for (std::int64_t r = 0; r < m; ++r) {
        want += static_cast<double>(a.widened[static_cast<std::size_t>(r * k + i)]) * b[static_cast<std::size_t>(r * cols + j)];
      }
      worst = std::max(worst, std::abs(want - out[static_cast<std::size_t>(i * cols + j)]));
      largest = std::max(largest, std::abs(want));
    }
  }
  return worst / largest;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gemm_tn_avx2)

BOOST_AUTO_TEST_CASE(agrees_with_a_double_precision_product) {
  static const NeedsAvx2 needs;
  BOOST_TEST(kiln::cpu::gemm_tn_fits(16, 2048));
  BOOST_TEST(!kiln::cpu::gemm_tn_fits(24, 64));  // K no multiple of 16: not taken
  BOOST_TEST(!kiln::cpu::gemm_tn_fits(64, 8));
  std::mt19937 rng(29);
  // (m, k, c): few rows (split columns of a; 300 also leaves a 44-row second block), many rows
  // (split rows; 1100 = 2 blocks of 275 per thread at 2 threads), many rows with K > C (roles
  // swapped), a single row, and K whose last strip of 6 holds 4 (64), 2 (32) or all 6 (48) columns.
  const std::tuple<std::int64_t, std::int64_t, std::int64_t> shapes[] = {
      {300, 64, 32},  {300, 48, 16}, {1100, 16, 64}, {1100, 32, 48}, {1600, 64, 16},
      {1600, 128, 32}, {1, 32, 16},  {700, 64, 32},  {257, 16, 16},
  };
  for (const GemmInput type : {GemmInput::f32, GemmInput::bf16, GemmInput::f16}) {
    for (const int threads : {1, 2, 3}) {
      for (const auto& [m, k, c] : shapes) {
        for (const bool accumulate : {false, true}) {
          BOOST_TEST_CONTEXT("input " << static_cast<int>(type) << " m " << m << " k " << k << " c " << c
                                      << " threads " << threads << " accumulate " << accumulate) {
            // f32 sums of up to 1600 products in another order than the reference's.
            BOOST_TEST(worst_difference(m, k, c, type, threads, accumulate, rng) < 2e-6);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(patch_rows_agree_with_an_explicit_im2col) {
  static const NeedsAvx2 needs;
  std::mt19937 rng(31);
  // (n, h, w, c, out_h, out_w, r, s, stride, pad) and k: a stride-2 3x3 with padding (odd and even
  // sides), a stride-2 1x1 (every other pixel), a stride-1 3x3, and one with enough rows (1152)
  // that threads split them.
  struct Case {
    kiln::cpu::PatchRows rows;
    std::int64_t k;
  };
  const auto patches = [](std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t r,
                          std::int64_t stride, std::int64_t pad) {
    const std::int64_t out_h = (h + 2 * pad - r) / stride + 1, out_w = (w + 2 * pad - r) / stride + 1;
    return kiln::cpu::PatchRows{nullptr, GemmInput::f32, n, h, w, c, out_h, out_w, r, r, stride, stride, pad, pad};
  };
  const Case cases[] = {{patches(2, 9, 8, 16, 3, 2, 1), 32}, {patches(1, 8, 7, 32, 1, 2, 0), 16},
                        {patches(2, 7, 7, 16, 3, 1, 1), 48}, {patches(2, 48, 48, 16, 3, 2, 1), 32}};
  for (const GemmInput type : {GemmInput::f32, GemmInput::bf16, GemmInput::f16}) {
    for (const int threads : {1, 2}) {
      for (const Case& c : cases) {
        for (const bool accumulate : {false, true}) {
          BOOST_TEST_CONTEXT("input " << static_cast<int>(type) << " " << c.rows.h << "x" << c.rows.w << "x"
                                      << c.rows.c << " window " << c.rows.r << " stride " << c.rows.stride_h
                                      << " k " << c.k << " threads " << threads << " accumulate " << accumulate) {
            BOOST_TEST(worst_patch_difference(c.rows, c.k, type, threads, accumulate, rng) < 2e-6);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
