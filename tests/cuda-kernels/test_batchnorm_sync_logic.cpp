// The plain-C++ half of the cuda backend's synchronised batch-norm kernels, without a GPU: how an
// image is walked as (outer, C, inner), how each channel's reduction is split into chunks
// (kernels/batchnorm_sync_geometry.hpp), the kernels' own index arithmetic run on the host (every
// value of a channel is visited exactly once by the first pass, in both layouts, and the
// element-wise pass finds each element's channel with 32- and 64-bit indices), the scratch sizes,
// and the argument checks with their messages (ops/kernel_validate.hpp; tensors tagged as device
// memory over host bytes nobody reads).
#define BOOST_TEST_MODULE cuda_batchnorm_sync_logic
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <kiln/errors.hpp>

#include "kernels/batchnorm_sync_geometry.hpp"
#include "ops/kernel_validate.hpp"

namespace kk = kiln::cuda::kernels;
using kiln::DType;
using kiln::Layout;
using kiln::Tensor;

namespace {

/// A tensor that claims device memory (over host bytes nobody reads).
Tensor dev(kiln::Shape shape, DType dtype, Layout layout = Layout::row_major) {
  const std::size_t bytes = std::max<std::size_t>(64, kiln::shape_numel(shape) * kiln::dtype_size(dtype));
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  auto storage = std::make_shared<kiln::Storage>(p, bytes, kiln::MemoryKind::device, [](void* q) { std::free(q); });
  return Tensor(storage, std::move(shape), dtype, 0, layout);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::BackendError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  const std::string msg = error_of(f);
  BOOST_TEST(msg.find(part) != std::string::npos, "message: " << msg);
  BOOST_TEST(msg.find("; fix the arguments the calling layer passes") != std::string::npos, "message: " << msg);
}

struct Image {
  std::int64_t n, c, h, w;
};

// Shapes with one value per channel, an H*W that divides the block, one just over it, one far
// above it, and channels that need several chunks in each layout.
const Image kImages[] = {{1, 1, 1, 1},  {3, 5, 7, 7},   {2, 3, 16, 16}, {5, 2, 1, 257},
                         {4, 3, 8, 8},  {20, 2, 15, 15}, {40, 3, 33, 31}, {2, 33, 5, 3}};

/// Every memory offset the first pass reads for channel c, in the order the threads of all
/// blocks would (a block's threads one after another), as the kernels compute them.
std::vector<std::int64_t> first_pass_offsets(const kk::ChannelWalk& w, const kk::ChannelReduceGeometry& g,
                                             std::int64_t c) {
  std::vector<std::int64_t> seen;
  for (std::int64_t chunk = 0; chunk < g.chunks; ++chunk) {
    if (w.layout == Layout::nhwc) {
      const std::int64_t end = kk::chunk_end(chunk, g.per_chunk, w.outer);
      for (unsigned ty = 0; ty < g.block_y; ++ty) {
        for (std::int64_t row = chunk * g.per_chunk + ty; row < end; row += g.block_y) {
          seen.push_back(kk::walk_offset(row, c, 0, w.c, 1));
        }
      }
      continue;
    }
    const std::int64_t end = kk::chunk_end(chunk, g.per_chunk, w.per_channel());
    const std::int64_t block = g.block_x, step_o = block / w.inner, step_i = block % w.inner;
    for (std::int64_t t = 0; t < block; ++t) {
      std::int64_t j = chunk * g.per_chunk + t;
      kk::PlanarCursor p = kk::planar_cursor(j, w.inner);
      for (; j < end; j += block) {
        seen.push_back(kk::walk_offset(p.o, c, p.i, w.c, w.inner));
        kk::planar_advance(p, step_o, step_i, w.inner);
      }
    }
  }
  return seen;
}

}  // namespace

BOOST_AUTO_TEST_CASE(walks_are_the_cpu_loops_outer_channel_inner) {
  const kk::ChannelWalk nchw = kk::channel_walk(8, 64, 56, 56, Layout::row_major);
  BOOST_TEST(nchw.outer == 8);
  BOOST_TEST(nchw.c == 64);
  BOOST_TEST(nchw.inner == 3136);
  const kk::ChannelWalk nhwc = kk::channel_walk(8, 64, 56, 56, Layout::nhwc);
  BOOST_TEST(nhwc.outer == 8 * 3136);
  BOOST_TEST(nhwc.inner == 1);
  BOOST_TEST(nchw.per_channel() == nhwc.per_channel());
  BOOST_TEST(nchw.total() == 8 * 64 * 3136);
}

BOOST_AUTO_TEST_CASE(reduce_geometry_fills_about_one_wave_with_enough_values_per_thread) {
  // ResNet stem at 32 images per GPU: 64 channels of 32 x 112 x 112 values.
  const kk::ChannelReduceGeometry nchw = kk::channel_reduce_geometry(kk::channel_walk(32, 64, 112, 112, Layout::row_major));
  BOOST_TEST(nchw.grid_x == 64u);
  BOOST_TEST(nchw.chunks == 16);  // 1024 blocks / 64 channels
  BOOST_TEST(nchw.per_chunk == 25088);
  BOOST_TEST(nchw.grid_y == 16u);
  BOOST_TEST(nchw.block_x == 256u);
  BOOST_TEST(nchw.block_y == 1u);
  const kk::ChannelReduceGeometry nhwc = kk::channel_reduce_geometry(kk::channel_walk(32, 64, 112, 112, Layout::nhwc));
  BOOST_TEST(nhwc.grid_x == 2u);  // two tiles of 32 channels
  BOOST_TEST(nhwc.chunks == 512);
  BOOST_TEST(nhwc.per_chunk == 784);  // rows: 98 per thread row
  BOOST_TEST(nhwc.block_x == 32u);
  BOOST_TEST(nhwc.block_y == 8u);
  // Many channels of few values (ResNet's last stage): one chunk each, the channels fill the GPU.
  const kk::ChannelReduceGeometry wide = kk::channel_reduce_geometry(kk::channel_walk(256, 2048, 7, 7, Layout::row_major));
  BOOST_TEST(wide.chunks == 1);
  BOOST_TEST(wide.grid_x == 2048u);
  // Few values: one chunk, not a block per handful of values.
  BOOST_TEST(kk::channel_reduce_geometry(kk::channel_walk(2, 5, 3, 4, Layout::row_major)).chunks == 1);
  BOOST_TEST(kk::channel_reduce_geometry(kk::channel_walk(2, 5, 3, 4, Layout::nhwc)).chunks == 1);
  // One huge channel: capped at kMaxChunks.
  const kk::ChannelReduceGeometry huge = kk::channel_reduce_geometry(kk::channel_walk(1 << 14, 1, 256, 256, Layout::row_major));
  BOOST_TEST(huge.chunks == kk::kMaxChunks);
  BOOST_TEST(huge.per_chunk == (std::int64_t{1} << 30) / kk::kMaxChunks);
}

BOOST_AUTO_TEST_CASE(reduce_geometry_has_no_empty_chunk_and_stays_in_bounds) {
  for (const Layout layout : {Layout::row_major, Layout::nhwc}) {
    for (std::int64_t n : {1, 3, 64, 1000}) {
      for (std::int64_t c : {1, 31, 32, 33, 512}) {
        for (std::int64_t hw : {1, 49, 3136}) {
          const kk::ChannelWalk w = kk::channel_walk(n, c, hw, 1, layout);
          const kk::ChannelReduceGeometry g = kk::channel_reduce_geometry(w);
          const std::int64_t items = layout == Layout::nhwc ? w.outer : w.per_channel();
          BOOST_TEST(g.chunks >= 1);
          BOOST_TEST(g.chunks <= kk::kMaxChunks);
          BOOST_TEST(g.chunks * g.per_chunk >= items);
          BOOST_TEST((g.chunks - 1) * g.per_chunk < items);  // the last chunk is not empty
          BOOST_TEST(g.grid_y == static_cast<unsigned>(g.chunks));
          BOOST_TEST(g.block_x * g.block_y == kk::kChannelReduceThreads);
          const std::int64_t tiles = layout == Layout::nhwc ? (c + 31) / 32 : c;
          BOOST_TEST(g.grid_x == static_cast<unsigned>(tiles));
          // More than one chunk only when there are fewer channel blocks than a wave, and then at
          // most about a wave of blocks.
          if (g.chunks > 1) {
            BOOST_TEST(tiles * g.chunks < kk::kTargetReduceBlocks + tiles);
            BOOST_TEST(2 * g.per_chunk >= static_cast<std::int64_t>(g.block_y == 1 ? g.block_x : g.block_y) *
                                               kk::kMinValuesPerThread);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(first_pass_reads_every_value_of_a_channel_exactly_once) {
  for (const Image& im : kImages) {
    for (const Layout layout : {Layout::row_major, Layout::nhwc}) {
      const kk::ChannelWalk w = kk::channel_walk(im.n, im.c, im.h, im.w, layout);
      const kk::ChannelReduceGeometry g = kk::channel_reduce_geometry(w);
      for (std::int64_t c : {std::int64_t{0}, im.c - 1}) {
        std::vector<int> hits(static_cast<std::size_t>(w.total()), 0);
        for (std::int64_t at : first_pass_offsets(w, g, c)) {
          BOOST_TEST_REQUIRE(at >= 0);
          BOOST_TEST_REQUIRE(at < w.total());
          ++hits[static_cast<std::size_t>(at)];
        }
        // Expected: exactly the offsets of channel c, each once (logical (n, c, h, w) -> memory).
        std::int64_t wrong = 0;
        for (std::int64_t i = 0; i < im.n; ++i) {
          for (std::int64_t ch = 0; ch < im.c; ++ch) {
            for (std::int64_t p = 0; p < im.h * im.w; ++p) {
              const std::int64_t at = layout == Layout::nhwc ? (i * im.h * im.w + p) * im.c + ch
                                                              : (i * im.c + ch) * im.h * im.w + p;
              if (hits[static_cast<std::size_t>(at)] != (ch == c ? 1 : 0)) ++wrong;
            }
          }
        }
        BOOST_TEST(wrong == 0, "layout " << (layout == Layout::nhwc ? "nhwc" : "nchw") << " image (" << im.n << ", "
                                         << im.c << ", " << im.h << ", " << im.w << ") channel " << c << " with "
                                         << g.chunks << " chunks");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(element_channel_agrees_in_both_index_widths) {
  for (const Image& im : kImages) {
    for (const Layout layout : {Layout::row_major, Layout::nhwc}) {
      const kk::ChannelWalk w = kk::channel_walk(im.n, im.c, im.h, im.w, layout);
      std::int64_t wrong = 0;
      for (std::int64_t o = 0; o < w.outer; ++o) {
        for (std::int64_t ch = 0; ch < w.c; ++ch) {
          for (std::int64_t i = 0; i < w.inner; ++i) {
            const std::int64_t at = kk::walk_offset(o, ch, i, w.c, w.inner);
            if (kk::element_channel<std::int64_t>(at, w.c, w.inner) != ch) ++wrong;
            const auto at32 = static_cast<std::uint32_t>(at);
            if (kk::element_channel<std::uint32_t>(at32, static_cast<std::uint32_t>(w.c),
                                                   static_cast<std::uint32_t>(w.inner)) != ch) {
              ++wrong;
            }
          }
        }
      }
      BOOST_TEST(wrong == 0);
    }
  }
  BOOST_TEST(kk::fits_32bit_index(0));
  BOOST_TEST(kk::fits_32bit_index((std::int64_t{1} << 31) - 1));
  BOOST_TEST(!kk::fits_32bit_index(std::int64_t{1} << 31));
  BOOST_TEST(!kk::fits_32bit_index(-1));
  // The largest 32-bit total plus one full grid stride still fits in 32 bits (no wrap-around).
  static_assert((std::int64_t{1} << 31) - 1 + 8192 * 256 < (std::int64_t{1} << 32));
}

BOOST_AUTO_TEST_CASE(partials_fill_the_scratch_without_overlap) {
  // Every (sum, channel, chunk) the first pass writes has its own slot inside the op's scratch,
  // and batchnorm_stats' f64 mean (C doubles after the partials) overlaps none of them.
  for (const Image& im : kImages) {
    for (const Layout layout : {Layout::row_major, Layout::nhwc}) {
      const kk::ChannelWalk w = kk::channel_walk(im.n, im.c, im.h, im.w, layout);
      const kk::ChannelReduceGeometry g = kk::channel_reduce_geometry(w);
      for (int sums : {1, 2}) {
        const std::size_t bytes = sums == 1 ? kk::stats_workspace_bytes(w) : kk::backward_reduce_workspace_bytes(w);
        const auto slots = static_cast<std::int64_t>(bytes / sizeof(double));
        std::vector<int> used(static_cast<std::size_t>(slots), 0);
        bool inside = true;
        for (std::int64_t s = 0; s < sums; ++s) {
          for (std::int64_t c = 0; c < w.c; ++c) {
            for (std::int64_t k = 0; k < g.chunks; ++k) {
              const std::int64_t at = kk::partial_slot(s, c, k, w.c, g.chunks);
              if (at < 0 || at >= slots) {
                inside = false;
              } else {
                ++used[static_cast<std::size_t>(at)];
              }
            }
          }
        }
        if (sums == 1) {  // the mean, at partial_slot(1, 0, 0, ...)
          for (std::int64_t c = 0; c < w.c; ++c) {
            const std::int64_t at = kk::partial_slot(1, 0, 0, w.c, g.chunks) + c;
            if (at >= slots) {
              inside = false;
            } else {
              ++used[static_cast<std::size_t>(at)];
            }
          }
        }
        BOOST_TEST(inside);
        BOOST_TEST(std::count(used.begin(), used.end(), 1) == slots);  // each slot once, none spare
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(scratch_sizes_follow_the_geometry) {
  const kk::ChannelWalk stem = kk::channel_walk(32, 64, 112, 112, Layout::row_major);  // 16 chunks
  BOOST_TEST(kk::stats_workspace_bytes(stem) == (64u * 16u + 64u) * sizeof(double));
  BOOST_TEST(kk::backward_reduce_workspace_bytes(stem) == 2u * 64u * 16u * sizeof(double));
  BOOST_TEST(kk::backward_elemt_workspace_bytes(stem) == 3u * 64u * sizeof(float));
}

BOOST_AUTO_TEST_CASE(arguments_are_the_sdk_checks_with_the_plan_descriptor) {
  using namespace kiln::cuda;
  kiln::BatchNormDesc d;
  d.n = 2, d.c = 5, d.h = 3, d.w = 4;
  d.dtype = DType::f16;
  const Tensor x = dev({2, 5, 3, 4}, DType::f16, Layout::nhwc), dy = dev({2, 5, 3, 4}, DType::f16, Layout::nhwc);
  const Tensor s = dev({5}, DType::f32);
  const kk::ChannelWalk w = validate_batchnorm_stats(d, s, s, x);
  BOOST_TEST(w.outer == 24);
  BOOST_TEST(w.c == 5);
  BOOST_TEST(w.inner == 1);
  BOOST_TEST((w.layout == Layout::nhwc));
  BOOST_TEST(validate_batchnorm_stats(d, s, s, x.with_layout(Layout::row_major)).inner == 12);
  BOOST_TEST(validate_batchnorm_backward_reduce(d, s, s, dy, x, s, s).outer == 24);
  BOOST_TEST(validate_batchnorm_backward_elemt(d, dy, dy, x, s, s, s, s, s, 48).c == 5);

  expect_error([&] { validate_batchnorm_stats(d, dev({5}, DType::bf16), s, x); },
               "cuda backend, batchnorm_stats: mean is bf16(5) but must be f32");
  expect_error([&] { validate_batchnorm_stats(d, s, dev({4}, DType::f32), x); }, "var is f32(4) but must have shape (5)");
  expect_error([&] { validate_batchnorm_stats(d, s, s, dev({2, 5, 3, 4}, DType::f32)); },
               "x is f32(2, 5, 3, 4) but must be f16");
  expect_error([&] { validate_batchnorm_stats(d, s, s, kiln::host_tensor({2, 5, 3, 4}, DType::f16)); },
               "is in host memory");
  expect_error([&] { validate_batchnorm_backward_reduce(d, s, s, dy.with_layout(Layout::row_major), x, s, s); },
               "cuda backend, batchnorm_backward_reduce: dy f16(2, 5, 3, 4) is row-major but x f16(2, 5, 3, 4) nhwc is nhwc");
  expect_error([&] { validate_batchnorm_backward_elemt(d, dy, dy, x, s, s, s, s, s, 23); },
               "count 23 (values per channel over every rank) is less than this batch's 24");
  expect_error([&] { validate_batchnorm_backward_elemt(d, dy, dy, x, Tensor(), s, s, s, s, 24); },
               "cuda backend, batchnorm_backward_elemt: gamma is undefined but is required");
}
