// out (+)= a^T b for tall row-major a and b (see gemm_tn_avx2.hpp).
//
// Names below: a [M][K] gives the 6-column strips (its values are broadcast), b [M][C] the
// 16-column panels (loaded as vectors); the microkernel adds a 6 x 16 block of out. A "block" is
// up to kBlockRows rows of M, packed once and consumed before the next.
#include "ops/gemm_tn_avx2.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ops/bf16_lanes_avx2.hpp"
#include "ops/block_6x16_avx2.hpp"
#include "ops/cpu_avx2_f16c.hpp"

namespace kiln::cpu {
namespace {

constexpr std::int64_t kStrip = 6;   // columns of a per strip: rows of an out block
constexpr std::int64_t kPanel = 16;  // columns of b per panel: columns of an out block
/// Rows of M per block: a panel (256 x 16 floats, 16 KiB) stays in L1 while the strips stream by.
constexpr std::int64_t kBlockRows = 256;
/// Strips packed at a time: 144 columns of a, 144 KiB at 256 rows, in L2 while every panel passes.
constexpr std::int64_t kChunkStrips = 24;
/// Threads split M where each gets at least this many rows; fewer (the 7x7 layers' 392 pixels)
/// and they split a's columns instead, sharing the packed panels, so no partial sums to add.
constexpr std::int64_t kSplitRowsPerThread = 512;
/// Where M is split and K > C, the roles swap (a^T b computed as (b^T a)^T) when out is at most
/// this many floats: its transposed add is then cheap, and the wider operand's panels (256 x K)
/// still fit in L2. Zen 2, ResNet-50's layers: 25088 x 256 x 64 5.4 ms swapped against 6.5.
constexpr std::int64_t kSwapMaxOut = 65536;

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }

struct Shape {
  std::int64_t m, k, c;
};

/// One operand: rows of `ld` elements of `type` (f32, or 16-bit values widened as they are packed),
/// or (b only) the patch rows of a convolution's input.
struct Source {
  const void* data;
  GemmInput type;
  std::int64_t ld;
  const PatchRows* patches = nullptr;

  std::int64_t element_bytes() const { return type == GemmInput::f32 ? 4 : 2; }
  const char* row(std::int64_t r) const { return static_cast<const char*>(data) + r * ld * element_bytes(); }
};

/// How one call runs: split M across threads or a's columns; roles swapped or not.
struct Split {
  bool rows;
  bool swap;
};

Split split_for(const Shape& s, int threads, bool patches) {
  const bool rows = threads == 1 || s.m >= kSplitRowsPerThread * threads;
  // Patch rows are gathered into panels only, so they never swap to the strips' side.
  return {rows, rows && !patches && s.m >= kSplitRowsPerThread && s.k > s.c && s.k * s.c <= kSwapMaxOut};
}

/// Floats of each scratch part, each a multiple of 16 (64 bytes) so every part stays aligned.
struct ScratchLayout {
  std::int64_t strips, panels, partial, partials;  // per thread, per thread, per partial, how many

  std::int64_t floats(int threads) const { return threads * (strips + panels) + partials * partial; }
};

ScratchLayout layout_for(const Shape& s, int threads, bool patches) {
  const Split split = split_for(s, threads, patches);
  ScratchLayout l{};
  // The packed strips, then one row of a chunk's columns widened to f32 (16-bit a).
  l.strips = kBlockRows * kChunkStrips * kStrip + kChunkStrips * kStrip;
  l.panels = kBlockRows * round_up(std::max(s.k, s.c), kPanel);
  l.partial = round_up(s.k * s.c, 16);
  // Split rows: each thread sums into its own partial, except thread 0 which writes out itself
  // unless the roles swap (its result is transposed too).
  l.partials = !split.rows ? 0 : split.swap ? threads : threads - 1;
  return l;
}

/// Adds (or, first block and !add, writes) the 6 x 16 block a_strip^T b_panel over `depth` rows
/// into out (rows `rows` <= 6 of it; the strip's other columns are zeros).
__attribute__((target("avx2,fma"))) void microkernel(std::int64_t rows, std::int64_t depth, const float* strip,
                                                      const float* panel, float* out, std::int64_t ldo, bool add) {
  Block6x16 block;
  for (std::int64_t r = 0; r < depth; ++r, strip += kStrip, panel += kPanel) {
    block.add(_mm256_load_ps(panel), _mm256_load_ps(panel + 8), strip, strip + 1, strip + 2, strip + 3, strip + 4,
              strip + 5);
  }
  block.store(rows, [&](std::int64_t i) { return out + i * ldo; }, add);
}

/// 16 values of `type` at src as f32 into dst (64-byte aligned).
__attribute__((target("avx2,f16c"), always_inline)) inline void panel_row(const char* src, GemmInput type, float* dst) {
  if (type == GemmInput::f32) {
    std::memcpy(dst, src, kPanel * sizeof(float));
    return;
  }
  const __m128i* half = reinterpret_cast<const __m128i*>(src);
  const __m128i lo = _mm_loadu_si128(half), hi = _mm_loadu_si128(half + 1);
  const bool bf16 = type == GemmInput::bf16;
  _mm256_store_ps(dst, bf16 ? bf16_lanes::widen8(lo) : _mm256_cvtph_ps(lo));
  _mm256_store_ps(dst + 8, bf16 ? bf16_lanes::widen8(hi) : _mm256_cvtph_ps(hi));
}

/// Copies rows [row, row + depth) of b's panels [p0, p1) to packed[p][depth][16] as f32, one
/// source row at a time (sequential reads, which the hardware prefetcher follows). Patch rows are
/// gathered here: panel p is channels (p % (c / 16)) * 16.. of tap p / (c / 16) of the window.
__attribute__((target("avx2,f16c"))) void pack_panels(const Source& b, std::int64_t row, std::int64_t depth,
                                                       std::int64_t p0, std::int64_t p1, float* packed) {
  const std::int64_t bytes = b.element_bytes();
  for (std::int64_t r = 0; r < depth; ++r) {
    if (b.patches == nullptr) {
      const char* src = b.row(row + r);
      for (std::int64_t p = p0; p < p1; ++p) panel_row(src + p * kPanel * bytes, b.type, packed + (p * depth + r) * kPanel);
      continue;
    }
    const PatchRows& x = *b.patches;
    const std::int64_t m = row + r, q = m % x.out_w, p_out = (m / x.out_w) % x.out_h, n = m / (x.out_w * x.out_h);
    const std::int64_t per_tap = x.c / kPanel;
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t tap = p / per_tap, kh = tap / x.s, kw = tap % x.s;
      const std::int64_t ih = p_out * x.stride_h - x.pad_h + kh, iw = q * x.stride_w - x.pad_w + kw;
      float* dst = packed + (p * depth + r) * kPanel;
      if (ih < 0 || ih >= x.h || iw < 0 || iw >= x.w) {
        std::memset(dst, 0, kPanel * sizeof(float));
        continue;
      }
      const char* pixel = static_cast<const char*>(x.x) + ((n * x.h + ih) * x.w + iw) * x.c * bytes;
      panel_row(pixel + (p % per_tap) * kPanel * bytes, b.type, dst);
    }
  }
}

/// Columns [first, last) of one row of a as f32: the row itself (f32), or widened into `buffer`
/// (16-bit; buffer[i] is column first + i). Returns where column `first` is. last - first is a
/// multiple of 8: chunks are 144 columns and K a multiple of 16 (gemm_tn_fits).
__attribute__((target("avx2,f16c"))) const float* f32_columns(const Source& a, std::int64_t r, std::int64_t first,
                                                              std::int64_t last, float* buffer) {
  if (a.type == GemmInput::f32) return reinterpret_cast<const float*>(a.row(r)) + first;
  const auto* src = reinterpret_cast<const std::uint16_t*>(a.row(r)) + first;
  const std::int64_t n = last - first;
  const bool bf16 = a.type == GemmInput::bf16;
  for (std::int64_t i = 0; i < n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(buffer + i, bf16 ? bf16_lanes::widen8(h) : _mm256_cvtph_ps(h));
  }
  return buffer;
}

/// Copies rows [row, row + depth) of a's strips [s0, s1) to packed[s - s0][depth][6] as f32;
/// columns past a's last (k) are zeros. `buffer` holds (s1 - s0) * 6 floats (16-bit a).
void pack_strips(const Source& a, std::int64_t k, std::int64_t row, std::int64_t depth, std::int64_t s0,
                 std::int64_t s1, float* packed, float* buffer) {
  const std::int64_t whole = std::min(s1, k / kStrip);
  const std::int64_t first = s0 * kStrip, last = std::min(s1 * kStrip, k);
  for (std::int64_t r = 0; r < depth; ++r) {
    const float* src = f32_columns(a, row + r, first, last, buffer);  // column first + i at src[i]
    for (std::int64_t s = s0; s < whole; ++s) {
      std::memcpy(packed + ((s - s0) * depth + r) * kStrip, src + (s - s0) * kStrip, kStrip * sizeof(float));
    }
    for (std::int64_t s = std::max(s0, whole); s < s1; ++s) {
      float* dst = packed + ((s - s0) * depth + r) * kStrip;
      for (std::int64_t i = 0; i < kStrip; ++i) dst[i] = s * kStrip + i < k ? src[(s - s0) * kStrip + i] : 0.0f;
    }
  }
}

/// The strips [s0, s1) of one block (rows [row, row + depth)) against all its packed panels, a
/// chunk of strips at a time; `prefetch` is called before each microkernel call. `strips` holds
/// the packed chunk and, after it, the widening buffer.
template <class Prefetch>
void strips_times_panels(const Source& a, const Shape& s, std::int64_t row, std::int64_t depth, std::int64_t s0,
                         std::int64_t s1, const float* panels, float* strips, float* out, bool add,
                         Prefetch&& prefetch) {
  const std::int64_t n_panels = s.c / kPanel;
  float* const buffer = strips + kBlockRows * kChunkStrips * kStrip;
  for (std::int64_t first = s0; first < s1; first += kChunkStrips) {
    const std::int64_t last = std::min(s1, first + kChunkStrips);
    pack_strips(a, s.k, row, depth, first, last, strips, buffer);
    for (std::int64_t p = 0; p < n_panels; ++p) {
      for (std::int64_t st = first; st < last; ++st) {
        prefetch();
        microkernel(std::min(kStrip, s.k - st * kStrip), depth, strips + (st - first) * depth * kStrip,
                    panels + p * depth * kPanel, out + st * kStrip * s.c + p * kPanel, s.c, add);
      }
    }
  }
}

/// One thread's rows [r0, r1) of M, all of out: out (+)= a[r0:r1]^T b[r0:r1], in blocks, each
/// packing its own panels; the next block's rows are prefetched to L2 while this one computes
/// (without, packing waited on memory: 6.5 -> 6.2 ms on 25088 x 256 x 64, 5.5 -> 5.0 on 6272 x 512 x 128).
void rows_of_one_thread(const Source& a, const Source& b, const Shape& s, std::int64_t r0, std::int64_t r1,
                        float* out, bool accumulate, float* strips, float* panels) {
  const std::int64_t rows = r1 - r0;
  if (rows <= 0) {
    if (!accumulate) std::fill(out, out + s.k * s.c, 0.0f);
    return;
  }
  const std::int64_t blocks = (rows + kBlockRows - 1) / kBlockRows, depth_each = (rows + blocks - 1) / blocks;
  const std::int64_t calls = (s.c / kPanel) * ((s.k + kStrip - 1) / kStrip);
  for (std::int64_t first = r0; first < r1; first += depth_each) {
    const std::int64_t depth = std::min(depth_each, r1 - first);
    pack_panels(b, first, depth, 0, s.c / kPanel, panels);
    // The next block's rows of a and b, each one contiguous range, spread over this block's calls.
    const std::int64_t next = first + depth, next_depth = std::min(depth_each, r1 - next);
    const char* next_b = b.patches == nullptr ? b.row(next) : nullptr;
    const char* next_a = a.row(next);
    // (Patch rows are scattered over the input: only a's are prefetched then.)
    const std::int64_t b_lines = next_depth > 0 && b.patches == nullptr ? next_depth * s.c * b.element_bytes() / 64 : 0;
    const std::int64_t lines = next_depth > 0 ? b_lines + next_depth * s.k * a.element_bytes() / 64 : 0;
    const std::int64_t per_call = (lines + calls - 1) / calls;
    std::int64_t done = 0;
    const auto prefetch = [&] {
      for (std::int64_t i = 0; i < per_call && done < lines; ++i, ++done) {
        _mm_prefetch(done < b_lines ? next_b + done * 64 : next_a + (done - b_lines) * 64, _MM_HINT_T1);
      }
    };
    strips_times_panels(a, s, first, depth, 0, (s.k + kStrip - 1) / kStrip, panels, strips, out,
                        accumulate || first > r0, prefetch);
  }
}

/// Few rows: every thread takes all of M for a share of a's strips, the panels packed once per
/// block by all threads together.
void split_strips(const Source& a, const Source& b, const Shape& s, float* out, bool accumulate, float* scratch,
                  const ScratchLayout& l, int threads) {
  float* const panels = scratch + threads * l.strips;  // thread 0's panel space, shared
  const std::int64_t n_strips = (s.k + kStrip - 1) / kStrip, n_panels = s.c / kPanel;
  const std::int64_t blocks = (s.m + kBlockRows - 1) / kBlockRows, depth_each = (s.m + blocks - 1) / blocks;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    float* const strips = scratch + t * l.strips;
    const std::int64_t s0 = n_strips * t / team, s1 = n_strips * (t + 1) / team;
    for (std::int64_t first = 0; first < s.m; first += depth_each) {
      const std::int64_t depth = std::min(depth_each, s.m - first);
#pragma omp for schedule(static)
      for (std::int64_t p = 0; p < n_panels; ++p) pack_panels(b, first, depth, p, p + 1, panels);
      strips_times_panels(a, s, first, depth, s0, s1, panels, strips, out, accumulate || first > 0, [] {});
#pragma omp barrier
    }
  }
}

/// Many rows: each thread sums its share of M into its own partial, added at the end; with the
/// roles swapped the partials are out^T and their sum is added transposed.
void split_rows(const Source& a, const Source& b, const Shape& s, float* out, bool accumulate, float* scratch,
                const ScratchLayout& l, int threads, bool swap) {
  // With the roles swapped the kernel computes b^T a: b gives the strips, a the panels.
  const Shape inner = swap ? Shape{s.m, s.c, s.k} : s;
  const Source& strip_side = swap ? b : a;
  const Source& panel_side = swap ? a : b;
  float* const partials = scratch + threads * (l.strips + l.panels);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    const std::int64_t r0 = s.m * t / team, r1 = s.m * (t + 1) / team;
    float* const mine = !swap && t == 0 ? out : partials + (swap ? t : t - 1) * l.partial;
    rows_of_one_thread(strip_side, panel_side, inner, r0, r1, mine, !swap && t == 0 && accumulate,
                       scratch + t * l.strips, scratch + threads * l.strips + t * l.panels);
#pragma omp barrier
    const int summed = swap ? team : team - 1;  // partials to add
    if (swap) {
#pragma omp for schedule(static)
      for (std::int64_t row = 0; row < s.k; ++row) {
        float* o = out + row * s.c;
        for (std::int64_t col = 0; col < s.c; ++col) {
          float v = accumulate ? o[col] : 0.0f;
          for (int p = 0; p < summed; ++p) v += partials[p * l.partial + col * s.k + row];
          o[col] = v;
        }
      }
    } else if (summed > 0) {
#pragma omp for schedule(static)
      for (std::int64_t row = 0; row < s.k; ++row) {
        float* o = out + row * s.c;
        for (int p = 0; p < summed; ++p) {
          const float* part = partials + p * l.partial + row * s.c;
          for (std::int64_t col = 0; col < s.c; ++col) o[col] += part[col];
        }
      }
    }
  }
}

}  // namespace

bool cpu_runs_gemm_tn_avx2() { return cpu_has_avx2_fma_f16c(); }

bool gemm_tn_fits(std::int64_t k, std::int64_t c) { return k > 0 && c > 0 && k % kPanel == 0 && c % kPanel == 0; }

std::size_t gemm_tn_scratch_bytes(std::int64_t m, std::int64_t k, std::int64_t c, int threads) {
  // Patches never swap: the layout without them is the larger (or the same).
  return static_cast<std::size_t>(layout_for({m, k, c}, threads, false).floats(threads)) * sizeof(float);
}

namespace {

void run(const Shape& s, const Source& a, const Source& b, float* out, bool accumulate, void* scratch, int threads) {
  const bool patches = b.patches != nullptr;
  const Split split = split_for(s, threads, patches);
  const ScratchLayout l = layout_for(s, threads, patches);
  float* const floats = static_cast<float*>(scratch);
  if (split.rows) {
    split_rows(a, b, s, out, accumulate, floats, l, threads, split.swap);
  } else {
    split_strips(a, b, s, out, accumulate, floats, l, threads);
  }
}

}  // namespace

void gemm_tn_avx2(std::int64_t m, std::int64_t k, std::int64_t c, const void* a, GemmInput a_type, const void* b,
                  GemmInput b_type, float* out, bool accumulate, void* scratch, int threads) {
  run({m, k, c}, {a, a_type, k}, {b, b_type, c}, out, accumulate, scratch, threads);
}

void gemm_tn_avx2_patches(std::int64_t k, const void* a, GemmInput a_type, const PatchRows& patches, float* out,
                          bool accumulate, void* scratch, int threads) {
  const Shape s{patches.n * patches.out_h * patches.out_w, k, patches.r * patches.s * patches.c};
  run(s, {a, a_type, k}, {patches.x, patches.type, s.c, &patches}, out, accumulate, scratch, threads);
}

}  // namespace kiln::cpu
