// Kiln's AVX2 direct convolution (see conv_direct_avx2.hpp).
//
// Names below: a "product" is one implicit matrix product, out(m)[0..cols) (+)= sum over the taps
// t that pixel m has and channels c < depth of source(m, t)[c] * panels[t][c][..]; forward and
// backward-data are one product each. Its output rows (pixels), grouped by the taps they have,
// are split between threads in strips of 6; a thread walks its strips a chunk at a time, and for
// each block of the reduction (whole taps or a channel range of one tap, ~256 deep) and each
// 16-column panel, runs the microkernel on every strip of the chunk: the chunk's input rows of
// the block stay in L2, the panel's block in L1.
#include "ops/conv_direct_avx2.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/bf16_convert.hpp"
#include "ops/block_6x16_avx2.hpp"
#include "ops/f16_convert.hpp"

namespace kiln::cpu {
namespace {

constexpr std::int64_t kStrip = 6;   // pixels per microkernel call: rows of an out block
constexpr std::int64_t kPanel = 16;  // output channels per panel: columns of an out block
/// Reduction depth per microkernel call: a panel's block (256 x 16 floats, 16 KiB) stays in L1.
constexpr std::int64_t kBlockDepth = 256;
/// Strips per chunk: their input rows of one block (144 pixels x 256 floats, 144 KiB) stay in L2.
constexpr std::int64_t kChunkStrips = 24;

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }

/// One product's geometry. Output row m is pixel (n, i, j) of the output image (n x out_h x
/// out_w); tap t = kh * s + kw of it reads source row (mul_h * i + off_h + sign * kh) / div_h (and
/// likewise the column) of the same image n, where that divides exactly and lies inside the
/// source; elsewhere the pixel lacks the tap. The forward reads (stride * i - pad + kh) / 1, the
/// backward-data (i + pad - kh) / stride: a dx pixel gets the taps of its parity class only.
struct Product {
  const float* src;
  std::int64_t src_h, src_w, depth;  // the source image; depth = its channels
  float* out;
  std::int64_t n, out_h, out_w, cols;  // the output image; cols = its channels
  std::int64_t r, s;
  std::int64_t mul_h = 1, mul_w = 1, off_h = 0, off_w = 0, sign = 1, div_h = 1, div_w = 1;
};

/// For each output row i and kernel row kh the source row (or -1), and each output row's missing
/// kernel rows as a bit mask; the same for columns.
struct Windows {
  std::vector<std::int64_t> row_src, col_src;    // [i * r + kh], [j * s + kw]
  std::vector<std::uint64_t> row_lacks, col_lacks;  // [i], [j]

  explicit Windows(const Product& pr) {
    const auto fill = [&](std::int64_t outs, std::int64_t taps, std::int64_t mul, std::int64_t off,
                          std::int64_t div, std::int64_t extent, std::vector<std::int64_t>& src,
                          std::vector<std::uint64_t>& lacks) {
      src.assign(static_cast<std::size_t>(outs * taps), -1);
      lacks.assign(static_cast<std::size_t>(outs), 0);
      for (std::int64_t i = 0; i < outs; ++i) {
        for (std::int64_t k = 0; k < taps; ++k) {
          const std::int64_t at = mul * i + off + pr.sign * k;
          if (at >= 0 && at % div == 0 && at / div < extent) {
            src[static_cast<std::size_t>(i * taps + k)] = at / div;
          } else {
            lacks[static_cast<std::size_t>(i)] |= std::uint64_t{1} << k;
          }
        }
      }
    };
    fill(pr.out_h, pr.r, pr.mul_h, pr.off_h, pr.div_h, pr.src_h, row_src, row_lacks);
    fill(pr.out_w, pr.s, pr.mul_w, pr.off_w, pr.div_w, pr.src_w, col_src, col_lacks);
  }
};

/// The output rows in the order they fill the strips, grouped by the taps they have: each group's
/// rows (in their own order) then dummies (-1) up to whole strips, and per strip its group.
/// A strip computes only its group's taps instead of multiplying zeros: on the 7x7 layers 18% of
/// the products are border taps, and a stride-2 backward-data pixel has 1, 2 or 4 of the 9.
struct StripOrder {
  std::vector<std::int64_t> rows;
  std::vector<std::int32_t> group;                // [strip]
  std::vector<std::vector<std::int64_t>> taps;  // [group]: its taps (kh * s + kw), ascending

  StripOrder(const Product& pr, const Windows& win) {
    // Rows (and columns) of the output sharing a mask of missing kernel rows (columns).
    const auto classes = [](const std::vector<std::uint64_t>& lacks) {
      std::vector<std::pair<std::uint64_t, std::vector<std::int64_t>>> out;
      for (std::size_t i = 0; i < lacks.size(); ++i) {
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& c) { return c.first == lacks[i]; });
        if (it == out.end()) it = out.insert(out.end(), {lacks[i], {}});
        it->second.push_back(static_cast<std::int64_t>(i));
      }
      return out;
    };
    const auto row_classes = classes(win.row_lacks), col_classes = classes(win.col_lacks);
    for (const auto& [row_lacks, is] : row_classes) {
      for (const auto& [col_lacks, js] : col_classes) {
        std::vector<std::int64_t> present;
        for (std::int64_t kh = 0; kh < pr.r; ++kh) {
          for (std::int64_t kw = 0; kw < pr.s; ++kw) {
            if (((row_lacks >> kh) & 1) == 0 && ((col_lacks >> kw) & 1) == 0) present.push_back(kh * pr.s + kw);
          }
        }
        const auto g = static_cast<std::int32_t>(taps.size());
        taps.push_back(std::move(present));
        for (std::int64_t img = 0; img < pr.n; ++img) {
          for (const std::int64_t i : is) {
            for (const std::int64_t j : js) rows.push_back((img * pr.out_h + i) * pr.out_w + j);
          }
        }
        while (rows.size() % kStrip != 0) rows.push_back(-1);
        group.resize(rows.size() / kStrip, g);
      }
    }
  }
};

/// Adds (or, !add, writes) the 6 x 16 block of out at out[i] + col, i < 6: the sum over
/// `segments` taps of depth channels from c0 of src[6 * s + i] times the panel block of tap
/// tap[s]. Dummy rows read zeros and write to a dummy row.
__attribute__((target("avx2,fma"))) void microkernel(std::int64_t segments, const float* const* src,
                                                      const std::int64_t* tap, std::int64_t tap_floats,
                                                      std::int64_t c0, std::int64_t depth, const float* panel,
                                                      float* const* out, std::int64_t col, bool add) {
  Block6x16 block;
  for (std::int64_t s = 0; s < segments; ++s, src += kStrip) {
    const float *x0 = src[0] + c0, *x1 = src[1] + c0, *x2 = src[2] + c0, *x3 = src[3] + c0, *x4 = src[4] + c0,
                *x5 = src[5] + c0;
    const float* w = panel + tap[s] * tap_floats + c0 * kPanel;
    for (std::int64_t r = 0; r < depth; ++r, w += kPanel) {
      block.add(_mm256_load_ps(w), _mm256_load_ps(w + 8), x0 + r, x1 + r, x2 + r, x3 + r, x4 + r, x5 + r);
    }
  }
  block.store(kStrip, [&](std::int64_t i) { return out[i] + col; }, add);
}

/// How a group's reduction is cut into blocks of ~kBlockDepth: several whole taps where a tap is
/// shallower, else each tap's channels in `parts` equal ranges (multiples of 16 where the depth
/// is). A group without taps has one empty block (writing zeros).
struct Blocking {
  std::int64_t per, parts, each;  // taps per block, channel ranges per tap, channels per range

  explicit Blocking(std::int64_t depth) {
    per = std::max<std::int64_t>(1, kBlockDepth / depth);
    parts = depth <= kBlockDepth ? 1 : (depth + kBlockDepth - 1) / kBlockDepth;
    each = parts == 1 ? depth : depth % 16 == 0 ? round_up((depth + parts - 1) / parts, 16) : (depth + parts - 1) / parts;
  }
  std::int64_t blocks(std::int64_t taps) const { return std::max<std::int64_t>(1, (taps + per - 1) / per * parts); }
};

/// Per-thread scratch: a chunk's source pointers [strip][tap of its group][6] and output pointers
/// [strip][6], and the dummy row the strips' dummies write to.
struct ThreadSpace {
  const float** src;
  float** out;
  float* dummy;
};

/// One product on `threads` threads: panels [cols / 16][r * s][depth][16]; `zeros` holds depth zeros.
void run_product(const Product& pr, const float* panels, const float* zeros, bool accumulate,
                 const std::vector<ThreadSpace>& space, int threads) {
  const Windows win(pr);
  const StripOrder order(pr, win);
  const std::int64_t strips = static_cast<std::int64_t>(order.group.size()), all_taps = pr.r * pr.s;
  const std::int64_t n_panels = pr.cols / kPanel, tap_floats = pr.depth * kPanel;
  const Blocking blocking(pr.depth);
  std::int64_t most_blocks = 0;
  for (const auto& t : order.taps) most_blocks = std::max(most_blocks, blocking.blocks(static_cast<std::int64_t>(t.size())));
  const auto taps_of = [&](std::int64_t st) -> const std::vector<std::int64_t>& {
    return order.taps[static_cast<std::size_t>(order.group[static_cast<std::size_t>(st)])];
  };
  // Threads split the strips by work (taps per strip, one for a strip without: it writes zeros).
  std::vector<std::int64_t> work_before(static_cast<std::size_t>(strips + 1), 0);
  for (std::int64_t st = 0; st < strips; ++st) {
    const auto taps = static_cast<std::int64_t>(taps_of(st).size());
    work_before[static_cast<std::size_t>(st + 1)] = work_before[static_cast<std::size_t>(st)] + std::max<std::int64_t>(1, taps);
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
      // The chunk's pointer tables (a dummy row reads the zero row).
      for (std::int64_t st = first; st < last; ++st) {
        const std::vector<std::int64_t>& taps = taps_of(st);
        const float** src = mine.src + (st - first) * all_taps * kStrip;
        for (std::int64_t i = 0; i < kStrip; ++i) {
          const std::int64_t m = order.rows[static_cast<std::size_t>(st * kStrip + i)];
          mine.out[(st - first) * kStrip + i] = m < 0 ? mine.dummy : pr.out + m * pr.cols;
          const std::int64_t img = m / (pr.out_h * pr.out_w), oi = m / pr.out_w % pr.out_h, oj = m % pr.out_w;
          for (std::size_t k = 0; k < taps.size(); ++k) {
            const std::int64_t kh = taps[k] / pr.s, kw = taps[k] % pr.s;
            src[static_cast<std::int64_t>(k) * kStrip + i] =
                m < 0 ? zeros
                      : pr.src + ((img * pr.src_h + win.row_src[static_cast<std::size_t>(oi * pr.r + kh)]) * pr.src_w +
                                  win.col_src[static_cast<std::size_t>(oj * pr.s + kw)]) * pr.depth;
          }
        }
      }
      for (std::int64_t b = 0; b < most_blocks; ++b) {
        for (std::int64_t p = 0; p < n_panels; ++p) {
          const float* panel = panels + p * all_taps * tap_floats;
          for (std::int64_t st = first; st < last; ++st) {
            const std::vector<std::int64_t>& taps = taps_of(st);
            const auto n_taps = static_cast<std::int64_t>(taps.size());
            if (b >= blocking.blocks(n_taps)) continue;
            const std::int64_t t0 = b / blocking.parts * blocking.per, t1 = std::min(n_taps, t0 + blocking.per);
            const std::int64_t c0 = b % blocking.parts * blocking.each, c1 = std::min(pr.depth, c0 + blocking.each);
            // The next strip's out block (6 cache lines), which the microkernel adds to at its
            // end: without, those reads missed L2 on the wide layers (512 x 512 at 7x7).
            if (st + 1 < last) {
              float* const* next = mine.out + (st + 1 - first) * kStrip;
              for (std::int64_t i = 0; i < kStrip; ++i) _mm_prefetch(reinterpret_cast<const char*>(next[i] + p * kPanel), _MM_HINT_T0);
            }
            microkernel(t1 - t0, mine.src + ((st - first) * all_taps + t0) * kStrip, taps.data() + t0, tap_floats, c0,
                        c1 - c0, panel, mine.out + (st - first) * kStrip, p * kPanel, accumulate || b > 0);
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

/// The weights as 16-column panels, panels[p][t][q][j] = weight of column 16 p + j, depth q and
/// tap t, which lies at w[column * col_stride + q * depth_stride + t] (OIHW: the forward's columns
/// are the output channels, the backward-data's the input channels). Each panel row (one cache
/// line) is written whole from 16 short runs of w, in L1 across the taps; writing the panels
/// column by column instead took 3 ms for 512 x 512 x 3 x 3 on the Zen 2, this ~1 ms.
void pack_panels(const float* w, std::int64_t cols, std::int64_t depth, std::int64_t taps, std::int64_t col_stride,
                 std::int64_t depth_stride, float* panels, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t p = 0; p < cols / kPanel; ++p) {
    float* panel = panels + p * taps * depth * kPanel;
    const float* wp = w + p * kPanel * col_stride;
    for (std::int64_t q = 0; q < depth; ++q) {
      for (std::int64_t t = 0; t < taps; ++t) {
        float* row = panel + (t * depth + q) * kPanel;
        for (std::int64_t j = 0; j < kPanel; ++j) row[j] = wp[j * col_stride + q * depth_stride + t];
      }
    }
  }
}

}  // namespace

bool cpu_runs_conv_direct_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

bool conv_direct_avx2_fits(const Conv2dDesc& d) {
  // r and s up to 64: a row's missing kernel rows are a 64-bit mask.
  return d.groups == 1 && d.dilation_h == 1 && d.dilation_w == 1 && d.c % kPanel == 0 &&
         d.k % kPanel == 0 && d.c > 0 && d.k > 0 && d.r <= 64 && d.s <= 64;
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
  pack_panels(w, d.k, d.c, taps, d.c * taps, taps, panels, threads);  // column k, depth c: w[k][c][t]
  Product pr{.src = x, .src_h = d.h, .src_w = d.w, .depth = d.c, .out = y, .n = d.n, .out_h = d.out_h(),
             .out_w = d.out_w(), .cols = d.k, .r = d.r, .s = d.s};
  pr.mul_h = d.stride_h, pr.mul_w = d.stride_w, pr.off_h = -d.pad_h, pr.off_w = -d.pad_w;
  run_product(pr, panels, zeros, accumulate, thread_spaces(d, panels, threads), threads);
}

void conv_direct_avx2_backward_data(const Conv2dDesc& d, const float* dy, const float* w, float* dx,
                                    bool accumulate, void* scratch, int threads) {
  const std::int64_t taps = d.r * d.s;
  float* const panels = static_cast<float*>(scratch);
  float* const zeros = panels + layout_for(d).panels;
  std::fill(zeros, zeros + d.k, 0.0f);
  pack_panels(w, d.c, d.k, taps, taps, d.c * taps, panels, threads);  // column c, depth k: w[k][c][t]
  // dx pixel (i, j) gets tap (kh, kw) from dy pixel ((i + pad_h - kh) / stride_h, ...) where that
  // divides: each parity class of dx's pixels its own taps (StripOrder groups them).
  Product pr{.src = dy, .src_h = d.out_h(), .src_w = d.out_w(), .depth = d.k, .out = dx, .n = d.n, .out_h = d.h,
             .out_w = d.w, .cols = d.c, .r = d.r, .s = d.s};
  pr.off_h = d.pad_h, pr.off_w = d.pad_w, pr.sign = -1, pr.div_h = d.stride_h, pr.div_w = d.stride_w;
  run_product(pr, panels, zeros, accumulate, thread_spaces(d, panels, threads), threads);
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

bool ConvDirectAvx2::takes(const Tensor& out, const Tensor& in, const Tensor& w) const {
  const DType plan = desc_.dtype;
  const bool dtypes = (plan == DType::f32 || plan == DType::f16 || plan == DType::bf16) && out.dtype() == plan &&
                      in.dtype() == plan && w.dtype() == plan;
  return dtypes && out.layout() == Layout::nhwc && in.layout() == Layout::nhwc && w.layout() != Layout::opaque &&
         w.layout() != Layout::nhwc;
}

namespace {

/// t's values as f32: t's own memory (f32), or widened (exactly) into `wide`.
const float* as_f32(const Tensor& t, float* wide) {
  const auto n = static_cast<std::size_t>(t.numel());
  const auto* half = static_cast<const std::uint16_t*>(t.data());
  if (t.dtype() == DType::f32) return static_cast<const float*>(t.data());
  if (t.dtype() == DType::bf16) bf16_to_f32_parallel(half, wide, n);
  else f16_to_f32_parallel(half, wide, n);
  return wide;
}

}  // namespace

void ConvDirectAvx2::run(const Tensor& out, const Tensor& in, const Tensor& w, bool forward) {
  const int threads = omp_get_max_threads();
  void* scratch = scratch_->get(kScratchSlot, conv_direct_avx2_scratch_bytes(desc_, threads));
  const bool wide = desc_.dtype != DType::f32;  // 16-bit operands: widened, computed in f32, narrowed
  const auto f32_space = [&](int slot, const Tensor& t) {
    return static_cast<float*>(scratch_->get(slot, static_cast<std::size_t>(t.numel()) * sizeof(float)));
  };
  const float* in32 = as_f32(in, wide ? f32_space(kScratchSlot + 1, in) : nullptr);
  const float* w32 = as_f32(w, wide ? f32_space(kScratchSlot + 2, w) : nullptr);
  float* out32 = wide ? f32_space(kScratchSlot + 3, out) : static_cast<float*>(out.data());
  if (forward) {
    conv_direct_avx2_forward(desc_, in32, w32, out32, false, scratch, threads);
  } else {
    conv_direct_avx2_backward_data(desc_, in32, w32, out32, false, scratch, threads);
  }
  if (!wide) return;
  const auto n = static_cast<std::size_t>(out.numel());
  auto* half = static_cast<std::uint16_t*>(out.data());
  if (out.dtype() == DType::bf16) f32_to_bf16_parallel(out32, half, n);
  else f32_to_f16_parallel(out32, half, n);
}

void ConvDirectAvx2::forward(const Tensor& y, const Tensor& x, const Tensor& w) { run(y, x, w, true); }

void ConvDirectAvx2::backward_data(const Tensor& dx, const Tensor& dy, const Tensor& w) { run(dx, dy, w, false); }

}  // namespace kiln::cpu
