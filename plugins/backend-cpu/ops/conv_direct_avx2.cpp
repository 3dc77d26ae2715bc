// Kiln's AVX2 direct convolution (see conv_direct_avx2.hpp).
//
// Names below: a "product" is one implicit matrix product, out(m)[0..cols) (+)= sum over its taps t
// and channels c < depth of source(m, t)[c] * panels[t][c][..]; the forward is one product, a
// backward-data one per phase. Its output rows (pixels) are split between threads in strips of 6;
// a thread walks its strips a chunk at a time, and for each block of the reduction (whole taps
// or a channel range of one tap, ~256 deep) and each 16-column panel, runs the microkernel on
// every strip of the chunk: the chunk's input rows of the block stay in L2, the panel's block in L1.
#include "ops/conv_direct_avx2.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace kiln::cpu {
namespace {

constexpr std::int64_t kStrip = 6;   // pixels per microkernel call: rows of an out block
constexpr std::int64_t kPanel = 16;  // output channels per panel: columns of an out block
/// Reduction depth per microkernel call: a panel's block (256 x 16 floats, 16 KiB) stays in L1.
constexpr std::int64_t kBlockDepth = 256;
/// Strips per chunk: their input rows of one block (144 pixels x 256 floats, 144 KiB) stay in L2.
constexpr std::int64_t kChunkStrips = 24;

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }

/// One product's geometry. Output row m is pixel (n, i, j) of an n x rows_h x rows_w grid, stored
/// at (out_h0 + out_step_h * i, out_w0 + out_step_w * j) of the output image; its tap t reads
/// source pixel (src_step_h * i + tap_h[t], src_step_w * j + tap_w[t]) of the same image n, or
/// zeros outside.
struct Product {
  const float* src;
  std::int64_t src_h, src_w, depth;  // the source image; depth = its channels
  float* out;
  std::int64_t out_h, out_w, cols;   // the output image; cols = its channels
  std::int64_t n, rows_h, rows_w;
  std::int64_t out_h0 = 0, out_w0 = 0, out_step_h = 1, out_step_w = 1, src_step_h = 1, src_step_w = 1;
  std::vector<std::int64_t> tap_h, tap_w, panel_tap;  // panel_tap[t]: the tap's place in the panels

  std::int64_t rows() const { return n * rows_h * rows_w; }
  std::int64_t taps() const { return static_cast<std::int64_t>(tap_h.size()); }
};

/// Adds (or, !add, writes) the 6 x 16 block of out at out[i] + col, i < 6: the sum over
/// `segments` taps of depth channels from c0 of src[6 * s + i] times the panel block of tap
/// panel_tap[s]; a segment whose first pointer is null is skipped. Dummy rows point at a dummy row.
__attribute__((target("avx2,fma"))) void microkernel(std::int64_t segments, const float* const* src,
                                                      const std::int64_t* panel_tap, std::int64_t tap_floats,
                                                      std::int64_t c0, std::int64_t depth, const float* panel,
                                                      float* const* out, std::int64_t col, bool add) {
  // Twelve named accumulators (in an array GCC 12 keeps them on the stack; gemm_tn_avx2.cpp).
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
         c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (std::int64_t s = 0; s < segments; ++s, src += kStrip) {
    if (src[0] == nullptr) continue;  // a tap all 6 pixels lack (in the padding)
    const float *x0 = src[0] + c0, *x1 = src[1] + c0, *x2 = src[2] + c0, *x3 = src[3] + c0, *x4 = src[4] + c0,
                *x5 = src[5] + c0;
    const float* w = panel + panel_tap[s] * tap_floats + c0 * kPanel;
    for (std::int64_t r = 0; r < depth; ++r, w += kPanel) {
      const __m256 b0 = _mm256_load_ps(w), b1 = _mm256_load_ps(w + 8);
      __m256 a = _mm256_broadcast_ss(x0 + r);
      c00 = _mm256_fmadd_ps(a, b0, c00);
      c01 = _mm256_fmadd_ps(a, b1, c01);
      a = _mm256_broadcast_ss(x1 + r);
      c10 = _mm256_fmadd_ps(a, b0, c10);
      c11 = _mm256_fmadd_ps(a, b1, c11);
      a = _mm256_broadcast_ss(x2 + r);
      c20 = _mm256_fmadd_ps(a, b0, c20);
      c21 = _mm256_fmadd_ps(a, b1, c21);
      a = _mm256_broadcast_ss(x3 + r);
      c30 = _mm256_fmadd_ps(a, b0, c30);
      c31 = _mm256_fmadd_ps(a, b1, c31);
      a = _mm256_broadcast_ss(x4 + r);
      c40 = _mm256_fmadd_ps(a, b0, c40);
      c41 = _mm256_fmadd_ps(a, b1, c41);
      a = _mm256_broadcast_ss(x5 + r);
      c50 = _mm256_fmadd_ps(a, b0, c50);
      c51 = _mm256_fmadd_ps(a, b1, c51);
    }
  }
  const __m256 sums[kStrip][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::int64_t i = 0; i < kStrip; ++i) {
    float* o = out[i] + col;
    __m256 lo = sums[i][0], hi = sums[i][1];
    if (add) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(o));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(o + 8));
    }
    _mm256_storeu_ps(o, lo);
    _mm256_storeu_ps(o + 8, hi);
  }
}

/// A block of the reduction: taps [t0, t1), channels [c0, c1) of each.
struct Block {
  std::int64_t t0, t1, c0, c1;
};

/// ~kBlockDepth deep blocks: several whole taps where a tap is shallower, else each tap's channels
/// in equal ranges (multiples of 16 unless the depth is not).
std::vector<Block> reduction_blocks(std::int64_t taps, std::int64_t depth) {
  std::vector<Block> blocks;
  if (depth <= kBlockDepth) {
    const std::int64_t per = std::max<std::int64_t>(1, kBlockDepth / depth);
    for (std::int64_t t = 0; t < taps; t += per) blocks.push_back({t, std::min(taps, t + per), 0, depth});
    return blocks;
  }
  const std::int64_t parts = (depth + kBlockDepth - 1) / kBlockDepth;
  const std::int64_t each = depth % 16 == 0 ? round_up((depth + parts - 1) / parts, 16) : (depth + parts - 1) / parts;
  for (std::int64_t t = 0; t < taps; ++t) {
    for (std::int64_t c = 0; c < depth; c += each) blocks.push_back({t, t + 1, c, std::min(depth, c + each)});
  }
  return blocks;
}

/// Per-thread scratch: a chunk's source pointers [strip][tap][6] and output pointers [strip][6],
/// and the dummy row the strips' missing pixels write to.
struct ThreadSpace {
  const float** src;
  float** out;
  float* dummy;
};

/// Where tap `tap` of output row m reads: the source pixel's channels, or nullptr in the padding.
const float* source_of(const Product& pr, std::int64_t m, std::int64_t tap) {
  const std::int64_t per_image = pr.rows_h * pr.rows_w;
  const std::int64_t img = m / per_image, ij = m % per_image, row = ij / pr.rows_w, col = ij % pr.rows_w;
  const std::int64_t sh = pr.src_step_h * row + pr.tap_h[static_cast<std::size_t>(tap)];
  const std::int64_t sw = pr.src_step_w * col + pr.tap_w[static_cast<std::size_t>(tap)];
  const bool inside = sh >= 0 && sh < pr.src_h && sw >= 0 && sw < pr.src_w;
  return inside ? pr.src + ((img * pr.src_h + sh) * pr.src_w + sw) * pr.depth : nullptr;
}

float* output_of(const Product& pr, std::int64_t m) {
  const std::int64_t per_image = pr.rows_h * pr.rows_w;
  const std::int64_t img = m / per_image, ij = m % per_image, row = ij / pr.rows_w, col = ij % pr.rows_w;
  return pr.out + ((img * pr.out_h + pr.out_h0 + pr.out_step_h * row) * pr.out_w + pr.out_w0 + pr.out_step_w * col) *
                      pr.cols;
}

/// The order in which output rows fill the strips (-1: a dummy row), grouped by which taps fall in
/// the padding, each group padded to whole strips. A strip of one group skips the taps its pixels
/// all lack, instead of multiplying zeros: on the 7x7 layers that is 18% of the products (the
/// border pixels), 5-10% on the strided ones. Rows keep their order within a group.
std::vector<std::int64_t> strip_order(const Product& pr) {
  const std::int64_t rows = pr.rows(), taps = pr.taps();
  std::vector<std::pair<std::uint64_t, std::int64_t>> keyed(static_cast<std::size_t>(rows));
  for (std::int64_t m = 0; m < rows; ++m) {
    std::uint64_t missing = 0;
    for (std::int64_t t = 0; t < std::min<std::int64_t>(taps, 64); ++t) {
      if (source_of(pr, m, t) == nullptr) missing |= std::uint64_t{1} << t;
    }
    keyed[static_cast<std::size_t>(m)] = {missing, m};
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(rows + 64 * kStrip));
  for (std::size_t i = 0; i < keyed.size(); ++i) {
    order.push_back(keyed[i].second);
    const bool group_ends = i + 1 == keyed.size() || keyed[i + 1].first != keyed[i].first;
    while (group_ends && order.size() % kStrip != 0) order.push_back(-1);
  }
  return order;
}

/// One product on `threads` threads: panels [cols / 16][taps of the weights][depth][16]; `zeros`
/// holds depth zeros.
void run_product(const Product& pr, const float* panels, std::int64_t panel_taps, const float* zeros,
                 bool accumulate, const std::vector<ThreadSpace>& space, int threads) {
  const std::vector<std::int64_t> order = strip_order(pr);
  const std::int64_t taps = pr.taps(), strips = static_cast<std::int64_t>(order.size()) / kStrip;
  const std::int64_t n_panels = pr.cols / kPanel, tap_floats = pr.depth * kPanel;
  const std::vector<Block> blocks = reduction_blocks(taps, pr.depth);
  // Threads split the strips by work, the taps each strip computes (its first row's, as all its
  // rows share them): the border groups, last in the order, compute fewer.
  std::vector<std::int64_t> work_before(static_cast<std::size_t>(strips + 1), 0);
  for (std::int64_t st = 0; st < strips; ++st) {
    const std::int64_t m = order[static_cast<std::size_t>(st * kStrip)];
    std::int64_t present = 0;
    for (std::int64_t tap = 0; tap < taps; ++tap) present += source_of(pr, m, tap) != nullptr;
    work_before[static_cast<std::size_t>(st + 1)] = work_before[static_cast<std::size_t>(st)] + present;
  }
  const auto split = [&](int t, int team) {  // the first strip of thread t's share
    const std::int64_t target = work_before.back() * t / team;
    return static_cast<std::int64_t>(std::lower_bound(work_before.begin(), work_before.end(), target) - work_before.begin());
  };
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    const ThreadSpace& mine = space[static_cast<std::size_t>(t)];
    const std::int64_t s_begin = t == 0 ? 0 : split(t, team), s_end = t + 1 == team ? strips : split(t + 1, team);
    // Chunks of equal size: a short last chunk would stream every weight for few strips.
    const std::int64_t chunks = (s_end - s_begin + kChunkStrips - 1) / kChunkStrips;
    const std::int64_t per_chunk = chunks > 0 ? (s_end - s_begin + chunks - 1) / chunks : 0;
    for (std::int64_t first = s_begin; first < s_end; first += per_chunk) {
      const std::int64_t last = std::min(s_end, first + per_chunk);
      // The chunk's pointer tables: a tap no pixel of the strip has gets a null first pointer
      // (skipped); single pixels (dummies) read the zero row.
      for (std::int64_t st = first; st < last; ++st) {
        const float** src = mine.src + (st - first) * taps * kStrip;
        for (std::int64_t i = 0; i < kStrip; ++i) {
          const std::int64_t m = order[static_cast<std::size_t>(st * kStrip + i)];
          mine.out[(st - first) * kStrip + i] = m < 0 ? mine.dummy : output_of(pr, m);
          for (std::int64_t tap = 0; tap < taps; ++tap) {
            const float* at = m < 0 ? nullptr : source_of(pr, m, tap);
            src[tap * kStrip + i] = at != nullptr ? at : zeros;
          }
        }
        for (std::int64_t tap = 0; tap < taps; ++tap) {
          const float** seg = src + tap * kStrip;
          if (std::all_of(seg, seg + kStrip, [&](const float* p) { return p == zeros; })) seg[0] = nullptr;
        }
      }
      for (std::size_t b = 0; b < blocks.size(); ++b) {
        const Block& blk = blocks[b];
        const bool add = accumulate || b > 0;
        for (std::int64_t p = 0; p < n_panels; ++p) {
          const float* panel = panels + p * panel_taps * tap_floats;
          for (std::int64_t st = first; st < last; ++st) {
            // The next strip's out block (6 cache lines), which the microkernel adds to at its
            // end: without, those reads missed L2 on the wide layers (512 x 512 at 7x7).
            if (st + 1 < last) {
              float* const* next = mine.out + (st + 1 - first) * kStrip;
              for (std::int64_t i = 0; i < kStrip; ++i) _mm_prefetch(reinterpret_cast<const char*>(next[i] + p * kPanel), _MM_HINT_T0);
            }
            microkernel(blk.t1 - blk.t0, mine.src + ((st - first) * taps + blk.t0) * kStrip,
                        pr.panel_tap.data() + blk.t0, tap_floats, blk.c0, blk.c1 - blk.c0, panel,
                        mine.out + (st - first) * kStrip, p * kPanel, add);
          }
        }
      }
    }
  }
}

/// Scratch parts, in floats (each a multiple of 16): the panels, the zero row, and per thread the
/// pointer tables and the dummy row.
struct ScratchLayout {
  std::int64_t panels, zeros, per_thread;
  std::int64_t floats(int threads) const { return panels + zeros + threads * per_thread; }
};

ScratchLayout layout_for(const Conv2dDesc& d) {
  const std::int64_t taps = d.r * d.s, widest = std::max(d.c, d.k);
  const std::int64_t pointers = kChunkStrips * kStrip * (taps + 1);
  const std::int64_t pointer_floats = round_up(pointers * static_cast<std::int64_t>(sizeof(void*) / sizeof(float)), 16);
  return {d.k * d.c * taps, round_up(widest, 16), pointer_floats + round_up(widest, 16)};
}

std::vector<ThreadSpace> thread_spaces(const Conv2dDesc& d, float* scratch, int threads) {
  const ScratchLayout l = layout_for(d);
  const std::int64_t taps = d.r * d.s;
  std::vector<ThreadSpace> spaces;
  for (int t = 0; t < threads; ++t) {
    float* base = scratch + l.panels + l.zeros + t * l.per_thread;
    auto** src = reinterpret_cast<const float**>(base);
    auto** out = reinterpret_cast<float**>(base) + kChunkStrips * kStrip * taps;
    float* dummy = base + l.per_thread - round_up(std::max(d.c, d.k), 16);
    spaces.push_back({src, out, dummy});
  }
  return spaces;
}

}  // namespace

bool cpu_runs_conv_direct_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

bool conv_direct_avx2_fits(const Conv2dDesc& d) {
  return d.groups == 1 && d.dilation_h == 1 && d.dilation_w == 1 && d.dtype == DType::f32 && d.c % kPanel == 0 &&
         d.k % kPanel == 0 && d.c > 0 && d.k > 0;
}

std::size_t conv_direct_avx2_scratch_bytes(const Conv2dDesc& d, int threads) {
  return static_cast<std::size_t>(layout_for(d).floats(threads)) * sizeof(float);
}

void conv_direct_avx2_forward(const Conv2dDesc& d, const float* x, const float* w, float* y, bool accumulate,
                              void* scratch, int threads) {
  const std::int64_t taps = d.r * d.s;
  float* const panels = static_cast<float*>(scratch);
  float* const zeros = panels + layout_for(d).panels;
  std::fill(zeros, zeros + d.c, 0.0f);
  // panels[p][t][c][j] = w[16 p + j][c][t]: each panel row (one cache line) written whole, from
  // the 16 output channels' weights of one input channel (16 short runs, in L1 across the taps).
  // Writing it column by column instead (j outer) took 3 ms for 512 x 512 x 3 x 3 on the Zen 2.
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t p = 0; p < d.k / kPanel; ++p) {
    float* panel = panels + p * taps * d.c * kPanel;
    const float* wp = w + p * kPanel * d.c * taps;
    for (std::int64_t c = 0; c < d.c; ++c) {
      for (std::int64_t t = 0; t < taps; ++t) {
        float* row = panel + (t * d.c + c) * kPanel;
        for (std::int64_t j = 0; j < kPanel; ++j) row[j] = wp[(j * d.c + c) * taps + t];
      }
    }
  }
  Product pr{.src = x, .src_h = d.h, .src_w = d.w, .depth = d.c, .out = y, .out_h = d.out_h(), .out_w = d.out_w(),
             .cols = d.k, .n = d.n, .rows_h = d.out_h(), .rows_w = d.out_w()};
  pr.src_step_h = d.stride_h, pr.src_step_w = d.stride_w;
  for (std::int64_t t = 0; t < taps; ++t) {
    pr.tap_h.push_back(t / d.s - d.pad_h);
    pr.tap_w.push_back(t % d.s - d.pad_w);
    pr.panel_tap.push_back(t);
  }
  run_product(pr, panels, taps, zeros, accumulate, thread_spaces(d, panels, threads), threads);
}

void conv_direct_avx2_backward_data(const Conv2dDesc& d, const float* dy, const float* w, float* dx,
                                    bool accumulate, void* scratch, int threads) {
  const std::int64_t taps = d.r * d.s, sh = d.stride_h, sw = d.stride_w;
  float* const panels = static_cast<float*>(scratch);
  float* const zeros = panels + layout_for(d).panels;
  std::fill(zeros, zeros + d.k, 0.0f);
  // panels[p][t][k][j] = w[k][16 p + j][t]: 16 input channels' weights of one k are contiguous.
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t p = 0; p < d.c / kPanel; ++p) {
    float* panel = panels + p * taps * d.k * kPanel;
    for (std::int64_t k = 0; k < d.k; ++k) {
      const float* wk = w + (k * d.c + p * kPanel) * taps;
      for (std::int64_t t = 0; t < taps; ++t) {
        float* row = panel + (t * d.k + k) * kPanel;
        for (std::int64_t j = 0; j < kPanel; ++j) row[j] = wk[j * taps + t];
      }
    }
  }
  const std::vector<ThreadSpace> spaces = thread_spaces(d, panels, threads);
  // Phase (ph, pw): dx pixels (ph + sh i, pw + sw j); tap (kh, kw) reaches them from dy pixel
  // (i + dh, j + dw) where ph + pad_h - kh = sh * dh (and likewise for w).
  for (std::int64_t ph = 0; ph < sh; ++ph) {
    for (std::int64_t pw = 0; pw < sw; ++pw) {
      const std::int64_t rows_h = (d.h - ph + sh - 1) / sh, rows_w = (d.w - pw + sw - 1) / sw;
      if (rows_h <= 0 || rows_w <= 0) continue;
      Product pr{.src = dy, .src_h = d.out_h(), .src_w = d.out_w(), .depth = d.k, .out = dx, .out_h = d.h,
                 .out_w = d.w, .cols = d.c, .n = d.n, .rows_h = rows_h, .rows_w = rows_w};
      pr.out_h0 = ph, pr.out_w0 = pw, pr.out_step_h = sh, pr.out_step_w = sw;
      for (std::int64_t kh = 0; kh < d.r; ++kh) {
        const std::int64_t oh = ph + d.pad_h - kh;
        if (((oh % sh) + sh) % sh != 0) continue;
        for (std::int64_t kw = 0; kw < d.s; ++kw) {
          const std::int64_t ow = pw + d.pad_w - kw;
          if (((ow % sw) + sw) % sw != 0) continue;
          pr.tap_h.push_back(oh / sh);  // exact: oh is a multiple of sh
          pr.tap_w.push_back(ow / sw);
          pr.panel_tap.push_back(kh * d.s + kw);
        }
      }
      if (pr.tap_h.empty()) {  // no tap reaches these pixels: their gradient is zero
        if (accumulate) continue;
        for (std::int64_t n = 0; n < d.n; ++n) {
          for (std::int64_t i = 0; i < rows_h; ++i) {
            for (std::int64_t j = 0; j < rows_w; ++j) {
              float* o = dx + ((n * d.h + ph + sh * i) * d.w + pw + sw * j) * d.c;
              std::fill(o, o + d.c, 0.0f);
            }
          }
        }
        continue;
      }
      run_product(pr, panels, taps, zeros, accumulate, spaces, threads);
    }
  }
}

bool ConvDirectAvx2::pays(const Conv2dDesc& d) {
  // ResNet-50's strided 3x3s and its 7x7/512 3x3s (Winograd leaves them) were 1.03-1.5x faster
  // than oneDNN's AVX2 kernels on channels-last tensors (Zen 2, 2 threads, batch 8;
  // bench/conv_census). Its 1x1s were not: oneDNN's forward and the matmul route ran them at
  // 140-190 GFLOP/s against the kernel's 110-135 (its strided 1x1 backward-data too, but the widest).
  return fits(d) && d.r * d.s > 1;
}

ConvDirectAvx2::ConvDirectAvx2(const Conv2dDesc& d, std::shared_ptr<EdgeScratch> scratch)
    : desc_(d), scratch_(std::move(scratch)) {}

bool ConvDirectAvx2::takes(const Tensor& out, const Tensor& in, const Tensor& w) {
  const bool f32 = out.dtype() == DType::f32 && in.dtype() == DType::f32 && w.dtype() == DType::f32;
  return f32 && out.layout() == Layout::nhwc && in.layout() == Layout::nhwc && w.layout() != Layout::opaque &&
         w.layout() != Layout::nhwc;
}

void ConvDirectAvx2::forward(const Tensor& y, const Tensor& x, const Tensor& w) {
  const int threads = omp_get_max_threads();
  void* scratch = scratch_->get(kScratchSlot, conv_direct_avx2_scratch_bytes(desc_, threads));
  conv_direct_avx2_forward(desc_, static_cast<const float*>(x.data()), static_cast<const float*>(w.data()),
                           static_cast<float*>(y.data()), false, scratch, threads);
}

void ConvDirectAvx2::backward_data(const Tensor& dx, const Tensor& dy, const Tensor& w) {
  const int threads = omp_get_max_threads();
  void* scratch = scratch_->get(kScratchSlot, conv_direct_avx2_scratch_bytes(desc_, threads));
  conv_direct_avx2_backward_data(desc_, static_cast<const float*>(dy.data()), static_cast<const float*>(w.data()),
                                 static_cast<float*>(dx.data()), false, scratch, threads);
}

}  // namespace kiln::cpu
