// The cpu backend's plain -> blocked weight loop (plugins/backend-cpu/ops/plain_to_blocked.cpp),
// compiled into this test, against oneDNN's own reorder of the same memory, byte for byte over
// the whole blocked buffer (padding included): every weight layout oneDNN 2.6 picks for
// ResNet-50's forward and backward-data convolutions on this AVX-512 machine in the fp32 and
// bf16 plans (DNNL_VERBOSE: Acdb64a/32a/48a, ABcd16a16b, BAcd16a16b; AcdB64a2b/32a2b/48a2b,
// ABcd8a16b2a, BAcd8a16b2a), the ones other ISAs pick (OIhw16i16o, Acdb16a), grouped 5-D weights,
// channel counts that are no multiple of the blocks (the 3-channel stem, odd counts: padded
// layouts), every dtype pair (f32/bf16 -> f32/bf16) with bf16 rounding edge cases, and a
// destination full of another layer's garbage (the padding must come out zero). Then the weight
// input edge (dnnl_edge.cpp) that uses it: which path each layout takes, counted. On a CPU whose
// oneDNN has no bf16 kernels (AVX2 only), oneDNN's bf16 reorders are not exact (denormals and -0
// become +0), so there the bf16 cases compare with oneDNN's f32 reorder narrowed by the loop's
// documented rule (expected_blocked()).
//
// Two suites, registered as two CTest tests (tests/ops/CMakeLists.txt): `portable` runs the
// scalar loop over every case and the weight edges on whatever CPU this is; `avx512` runs the
// same cases through the AVX-512 kernels and exits 77 (CTest: Skipped, never Passed) on a CPU
// without AVX-512 F/BW/VL, where those kernels cannot run.
#define KILN_TEST_MODULE test_plain_to_blocked
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "ops/dnnl_edge.hpp"
#include "ops/plain_to_blocked.hpp"
#include "ops/plain_to_blocked_avx512.hpp"

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using kiln::cpu::PlainToBlocked;

dnnl::memory::desc plain(const dims& d, dt type) {
  return dnnl::memory::desc(d, type, d.size() == 4 ? tag::abcd : tag::abcde);
}

std::uint16_t bf16_of(float f) {  // truncation: only used to make bf16 test inputs
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// Random source values, plus (for f32 sources) values that exercise bf16 rounding: exact ties
/// both ways, denormals, signed zeros, infinities, NaNs, the largest finite float.
void fill_source(void* data, std::size_t n, dt type, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  const float specials[] = {0.0f, -0.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -(1.0f + 1.0f / 256),
                            std::numeric_limits<float>::denorm_min(), -1e-40f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::min()};
  for (std::size_t i = 0; i < n; i += 7) v[i] = specials[(i / 7) % std::size(specials)];
  if (type == dt::f32) {
    std::memcpy(data, v.data(), n * sizeof(float));
  } else {
    auto* b = static_cast<std::uint16_t*>(data);
    for (std::size_t i = 0; i < n; ++i) b[i] = bf16_of(v[i]);
  }
}

/// f32 -> bf16 as plain_to_blocked.cpp documents it (and as oneDNN's AVX-512 kernels round):
/// zeros and denormals to a zero of the same sign, NaNs truncated with the quiet bit set, the
/// rest (infinities included) to nearest even.
std::uint16_t bf16_rounded(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  const auto high = static_cast<std::uint16_t>(u >> 16);
  if (magnitude < 0x00800000u) return static_cast<std::uint16_t>(high & 0x8000u);
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(high | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// Whether oneDNN's bf16 reorders copy bf16 bit for bit on this CPU. With bf16 kernels (AVX-512
/// core and up) they do; on an AVX2-only CPU oneDNN 2.6 runs its reference reorder, which goes
/// through f32 and turns bf16 denormals and -0 into +0 (0x8001 -> 0x8000 -> 0x0000). There
/// oneDNN's bf16 output is no reference for a loop that copies bits.
bool onednn_bf16_reorder_is_exact() {
  static const bool exact = [] {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const dims d{16, 16, 1, 1};
    const dnnl::memory::desc from_desc(d, dt::bf16, tag::abcd), to_desc(d, dt::bf16, tag::ABcd16a16b);
    dnnl::memory from(from_desc, engine), to(to_desc, engine);
    auto* in = static_cast<std::uint16_t*>(from.get_data_handle());
    for (int i = 0; i < 256; ++i) in[i] = (i % 2 == 0) ? 0x8001 : 0x8000;  // a denormal, -0
    dnnl::reorder(from, to).execute(stream, from, to);
    stream.wait();
    const auto* out = static_cast<const std::uint16_t*>(to.get_data_handle());
    return std::count(out, out + 256, std::uint16_t{0x8001}) == 128 &&
           std::count(out, out + 256, std::uint16_t{0x8000}) == 128;
  }();
  return exact;
}

/// What the blocked buffer must hold: oneDNN's reorder of the same memory where oneDNN's bf16
/// reorders are exact (or no bf16 is involved); elsewhere oneDNN's f32 reorder of the widened
/// source (the layout and the zeroed padding, which f32 reorders keep exact on every ISA),
/// narrowed by the documented rule -- or bit for bit for a bf16 -> bf16 copy.
dnnl::memory expected_blocked(dnnl::memory src, const dims& d, tag blocked_tag, dt src_type, dt dst_type,
                              const dnnl::engine& engine, dnnl::stream& stream) {
  const dnnl::memory::desc user = plain(d, src_type), blocked(d, dst_type, blocked_tag);
  dnnl::memory expected(blocked, engine);
  std::memset(expected.get_data_handle(), 0x5c, blocked.get_size());
  if ((src_type == dt::f32 && dst_type == dt::f32) || onednn_bf16_reorder_is_exact()) {
    dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, blocked)).execute(stream, src, expected);
    stream.wait();
    return expected;
  }
  const dnnl::memory::desc wide_user(d, dt::f32, d.size() == 4 ? tag::abcd : tag::abcde);
  dnnl::memory wide(wide_user, engine);
  const std::size_t n = user.get_size() / dnnl::memory::data_type_size(src_type);
  auto* w = static_cast<float*>(wide.get_data_handle());
  if (src_type == dt::f32) {
    std::memcpy(w, src.get_data_handle(), n * sizeof(float));
  } else {
    const auto* b = static_cast<const std::uint16_t*>(src.get_data_handle());
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t u = static_cast<std::uint32_t>(b[i]) << 16;
      std::memcpy(&w[i], &u, sizeof u);
    }
  }
  const dnnl::memory::desc wide_blocked(d, dt::f32, blocked_tag);
  dnnl::memory wide_out(wide_blocked, engine);
  std::memset(wide_out.get_data_handle(), 0x5c, wide_blocked.get_size());
  dnnl::reorder(dnnl::reorder::primitive_desc(engine, wide_user, engine, wide_blocked)).execute(stream, wide, wide_out);
  stream.wait();
  const auto* f = static_cast<const float*>(wide_out.get_data_handle());
  const std::size_t m = wide_blocked.get_size() / sizeof(float);
  if (dst_type == dt::f32) {
    std::memcpy(expected.get_data_handle(), f, m * sizeof(float));
  } else {
    auto* out = static_cast<std::uint16_t*>(expected.get_data_handle());
    for (std::size_t i = 0; i < m; ++i) {
      std::uint32_t u;
      std::memcpy(&u, &f[i], sizeof u);
      // A bf16 source widened exactly: its low half is zero and the copy keeps the bits.
      out[i] = src_type == dt::bf16 ? static_cast<std::uint16_t>(u >> 16) : bf16_rounded(f[i]);
    }
  }
  return expected;
}

/// Runs PlainToBlocked (its AVX-512 kernels if `simd`, else the scalar loop) on a random plain
/// source into a destination pre-filled with garbage, and compares the whole blocked buffer with
/// expected_blocked().
void check_against_reorder(const dims& d, tag blocked_tag, dt src_type, dt dst_type, bool simd) {
  BOOST_TEST_CONTEXT("dims " << d.size() << "-D " << d[0] << "x" << d[1] << "x" << d[2] << "x" << d[3] << ", tag "
                             << static_cast<int>(blocked_tag) << ", " << (src_type == dt::f32 ? "f32" : "bf16")
                             << " -> " << (dst_type == dt::f32 ? "f32" : "bf16")) {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const dnnl::memory::desc user = plain(d, src_type), blocked(d, dst_type, blocked_tag);
    BOOST_TEST_REQUIRE(PlainToBlocked::handles(user, blocked));

    std::mt19937 rng(11);
    dnnl::memory src(user, engine);
    const std::size_t src_elems = user.get_size() / dnnl::memory::data_type_size(src_type);
    fill_source(src.get_data_handle(), src_elems, src_type, rng);

    const std::size_t bytes = blocked.get_size();
    const dnnl::memory expected = expected_blocked(src, d, blocked_tag, src_type, dst_type, engine, stream);

    const auto* want = static_cast<const unsigned char*>(expected.get_data_handle());
    const std::size_t esize = dnnl::memory::data_type_size(dst_type);
    BOOST_TEST_CONTEXT((simd ? "avx512" : "scalar")) {
      std::vector<unsigned char> got(bytes, 0xa7);  // another layer's leftovers
      PlainToBlocked(user, blocked, simd).run(src.get_data_handle(), got.data());
      std::size_t mismatches = 0;
      for (std::size_t e = 0; e < bytes / esize; ++e) {
        if (std::memcmp(&got[e * esize], want + e * esize, esize) != 0 && ++mismatches <= 5) {
          BOOST_TEST(false, "element " << e << " of the blocked buffer differs");
        }
      }
      BOOST_TEST(mismatches == 0u);
    }
  }
}

void check_all_dtypes(const dims& d, tag blocked_tag, bool simd) {
  for (dt s : {dt::f32, dt::bf16}) {
    for (dt t : {dt::f32, dt::bf16}) check_against_reorder(d, blocked_tag, s, t, simd);
  }
}

void check_fp32_plan_layouts_of_resnet50_match_onednn(bool simd) {
  check_against_reorder({64, 3, 7, 7}, tag::Acdb64a, dt::f32, dt::f32, simd);  // the stem
  check_against_reorder({256, 64, 1, 1}, tag::Acdb64a, dt::f32, dt::f32, simd);
  check_against_reorder({128, 128, 3, 3}, tag::Acdb64a, dt::f32, dt::f32, simd);
  check_against_reorder({256, 256, 3, 3}, tag::Acdb32a, dt::f32, dt::f32, simd);
  check_against_reorder({1024, 256, 1, 1}, tag::Acdb48a, dt::f32, dt::f32, simd);  // 1024 = 21*48 + 16: padded
  check_against_reorder({128, 128, 3, 3}, tag::ABcd16a16b, dt::f32, dt::f32, simd);
  check_against_reorder({512, 512, 3, 3}, tag::ABcd16a16b, dt::f32, dt::f32, simd);
  check_against_reorder({512, 256, 3, 3}, tag::BAcd16a16b, dt::f32, dt::f32, simd);
  check_against_reorder({512, 128, 1, 1}, tag::BAcd16a16b, dt::f32, dt::f32, simd);
  check_against_reorder({2048, 1024, 1, 1}, tag::BAcd16a16b, dt::f32, dt::f32, simd);
}

void check_bf16_plan_layouts_of_resnet50_match_onednn(bool simd) {
  for (dt s : {dt::bf16, dt::f32}) {  // bf16 weights, or f32 master weights converted on the way
    check_against_reorder({64, 3, 7, 7}, tag::AcdB64a2b, s, dt::bf16, simd);  // the stem: I padded 3 -> 4
    check_against_reorder({64, 64, 1, 1}, tag::AcdB64a2b, s, dt::bf16, simd);
    check_against_reorder({64, 64, 3, 3}, tag::AcdB64a2b, s, dt::bf16, simd);
    check_against_reorder({256, 256, 3, 3}, tag::AcdB32a2b, s, dt::bf16, simd);
    check_against_reorder({2048, 512, 1, 1}, tag::AcdB48a2b, s, dt::bf16, simd);  // O padded to 2064
    check_against_reorder({128, 128, 3, 3}, tag::ABcd8a16b2a, s, dt::bf16, simd);
    check_against_reorder({512, 512, 3, 3}, tag::ABcd8a16b2a, s, dt::bf16, simd);
    check_against_reorder({512, 512, 3, 3}, tag::AcdB32a2b, s, dt::bf16, simd);
    check_against_reorder({1024, 256, 1, 1}, tag::BAcd8a16b2a, s, dt::bf16, simd);
  }
}

void check_other_isas_layouts_match_onednn(bool simd) {
  check_all_dtypes({64, 3, 7, 7}, tag::Acdb16a, simd);
  check_all_dtypes({128, 64, 3, 3}, tag::OIhw16i16o, simd);
  check_all_dtypes({64, 32, 3, 3}, tag::OIhw8i16o2i, simd);
}

void check_padded_channels_get_zeros_in_a_dirty_destination(bool simd) {
  // 20, 33, 5 and 3 are no multiples of 16, 32, 48 or 64.
  check_all_dtypes({20, 33, 3, 3}, tag::ABcd16a16b, simd);
  check_all_dtypes({20, 33, 3, 2}, tag::AcdB64a2b, simd);
  check_all_dtypes({33, 20, 1, 1}, tag::BAcd8a16b2a, simd);
  check_all_dtypes({5, 3, 1, 1}, tag::OIhw16i16o, simd);
  check_all_dtypes({50, 7, 3, 3}, tag::Acdb48a, simd);
  check_all_dtypes({3, 5, 7, 7}, tag::AcdB32a2b, simd);
  check_all_dtypes({50, 8, 3, 3}, tag::AcdB48a2b, simd);  // O padded to 96, pairs HW apart
  check_all_dtypes({50, 8, 2, 2}, tag::Acdb48a, simd);
}

void check_small_kernels_in_every_vector_layout_match_onednn(bool simd) {
  // 2x2 and 1x3 kernels and O, I no multiple of 64 in the layouts whose vector kernels take
  // the spatial positions as transpose columns.
  for (const dims& d : {dims{32, 48, 2, 2}, dims{48, 32, 1, 3}}) {
    check_all_dtypes(d, tag::ABcd16a16b, simd);
    check_all_dtypes(d, tag::BAcd16a16b, simd);
    check_all_dtypes(d, tag::ABcd8a16b2a, simd);
    check_all_dtypes(d, tag::BAcd8a16b2a, simd);
    check_all_dtypes(d, tag::AcdB32a2b, simd);
    check_all_dtypes(d, tag::Acdb32a, simd);
  }
}

void check_grouped_weights_match_onednn(bool simd) {
  check_all_dtypes({2, 32, 16, 3, 3}, tag::gOIhw16i16o, simd);
  check_all_dtypes({3, 20, 24, 1, 1}, tag::gOIhw16i16o, simd);  // padded inside each group
  check_all_dtypes({4, 16, 32, 3, 3}, tag::gOIhw8i16o2i, simd);
  check_all_dtypes({32, 1, 1, 3, 3}, tag::Goihw16g, simd);  // depthwise: the group dim is blocked
}

/// The weight input edge on this CPU: each ResNet-50 layout takes Kiln's loop where the loop is
/// vectorised here, oneDNN's reorder otherwise, counted; either way the scratch, dirty from
/// another layer, ends up byte for byte what oneDNN's reorder writes. With AVX-512 every layout
/// but the bf16 stem's (padded I, 7x7: no vector kernel) takes the loop. Without it only the
/// `runs` kernel exists (a memcpy per run of 16 contiguous source I: 1x1 BAcd16a16b), so the
/// other layouts keep oneDNN.
void check_weight_edges(bool avx512) {
  struct Case {
    dims d;
    tag t;
    dt type;
    bool loop_avx512, loop_without;
  };
  const Case cases[] = {{{256, 64, 1, 1}, tag::Acdb64a, dt::f32, true, false},
                        {{256, 256, 3, 3}, tag::Acdb32a, dt::f32, true, false},
                        {{512, 128, 1, 1}, tag::BAcd16a16b, dt::f32, true, true},
                        {{2048, 512, 1, 1}, tag::AcdB48a2b, dt::bf16, true, false},
                        {{1024, 256, 1, 1}, tag::BAcd8a16b2a, dt::bf16, true, false},
                        {{128, 128, 3, 3}, tag::ABcd16a16b, dt::f32, true, false},
                        {{128, 128, 3, 3}, tag::ABcd8a16b2a, dt::bf16, true, false},
                        {{256, 256, 3, 3}, tag::AcdB32a2b, dt::bf16, true, false},
                        {{64, 3, 7, 7}, tag::AcdB64a2b, dt::bf16, false, false}};  // the bf16 stem: I = 3, 7x7
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  auto scratch = std::make_shared<kiln::cpu::EdgeScratch>();
  for (const Case& c : cases) {
    const bool loop = avx512 ? c.loop_avx512 : c.loop_without;
    BOOST_TEST_CONTEXT("dims " << c.d[0] << "x" << c.d[1] << "x" << c.d[2] << "x" << c.d[3] << ", tag "
                               << static_cast<int>(c.t)) {
      const dnnl::memory::desc user = plain(c.d, c.type), blocked(c.d, c.type, c.t);
      std::mt19937 rng(5);
      dnnl::memory src(user, engine), expected(blocked, engine);
      fill_source(src.get_data_handle(), user.get_size() / dnnl::memory::data_type_size(c.type), c.type, rng);
      std::memset(expected.get_data_handle(), 0x5c, blocked.get_size());
      dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, blocked)).execute(stream, src, expected);
      stream.wait();

      std::memset(scratch->get(1, blocked.get_size()), 0xa7, blocked.get_size());  // another layer's weights
      kiln::cpu::Edge edge(engine, user, blocked, scratch, 1);
      auto& counts = kiln::cpu::weight_reorder_counts();
      const std::uint64_t loop_before = counts.kiln_loop, onednn_before = counts.onednn_reorder;
      edge.bind(src.get_data_handle());
      edge.pull(stream);
      stream.wait();
      BOOST_TEST(counts.kiln_loop - loop_before == (loop ? 1u : 0u));
      BOOST_TEST(counts.onednn_reorder - onednn_before == (loop ? 0u : 1u));
      BOOST_TEST(std::memcmp(edge.inner().get_data_handle(), expected.get_data_handle(), blocked.get_size()) == 0);
    }
  }
}

/// Ends the run with 77 (CTest: Skipped) on a CPU without the AVX-512 kernels' instructions:
/// the `avx512` suite would otherwise run the scalar loop again and pass without testing them.
struct NeedsAvx512 {
  NeedsAvx512() {
    if (kiln::cpu::plain_to_blocked_avx512::has_avx512()) return;
    std::printf("SKIPPED: this CPU has no AVX-512 F/BW/VL; the plain -> blocked AVX-512 kernels cannot run here\n");
    std::fflush(stdout);
    std::exit(77);
  }
};

}  // namespace

// The scalar loop on every case, and the weight edges as this CPU runs them.
BOOST_AUTO_TEST_SUITE(portable)

BOOST_AUTO_TEST_CASE(fp32_plan_layouts_of_resnet50_match_onednn) { check_fp32_plan_layouts_of_resnet50_match_onednn(false); }
BOOST_AUTO_TEST_CASE(bf16_plan_layouts_of_resnet50_match_onednn) { check_bf16_plan_layouts_of_resnet50_match_onednn(false); }
BOOST_AUTO_TEST_CASE(other_isas_layouts_match_onednn) { check_other_isas_layouts_match_onednn(false); }
BOOST_AUTO_TEST_CASE(padded_channels_get_zeros_in_a_dirty_destination) {
  check_padded_channels_get_zeros_in_a_dirty_destination(false);
}
BOOST_AUTO_TEST_CASE(small_kernels_in_every_vector_layout_match_onednn) {
  check_small_kernels_in_every_vector_layout_match_onednn(false);
}
BOOST_AUTO_TEST_CASE(grouped_weights_match_onednn) { check_grouped_weights_match_onednn(false); }

BOOST_AUTO_TEST_CASE(refuses_what_it_does_not_handle) {
  const dims d{32, 32, 3, 3};
  const dnnl::memory::desc blocked(d, dt::f32, tag::ABcd16b16a);
  // A source that is not dense row-major, or f16, or of other dims.
  BOOST_TEST(!PlainToBlocked::handles(dnnl::memory::desc(d, dt::f32, tag::acdb), blocked));
  BOOST_TEST(!PlainToBlocked::handles(plain(d, dt::f16), blocked));
  BOOST_TEST(!PlainToBlocked::handles(plain({32, 32, 3, 1}, dt::f32), blocked));
  // A destination without inner blocks (nhwc activations keep oneDNN's reorder), or f16.
  BOOST_TEST(!PlainToBlocked::handles(plain(d, dt::f32), dnnl::memory::desc(d, dt::f32, tag::acdb)));
  BOOST_TEST(!PlainToBlocked::handles(plain(d, dt::f32), dnnl::memory::desc(d, dt::f16, tag::ABcd16b16a)));
  // 2-D tensors are not weights of a convolution.
  BOOST_TEST(!PlainToBlocked::handles(dnnl::memory::desc({32, 32}, dt::f32, tag::ab),
                                      dnnl::memory::desc({32, 32}, dt::f32, tag::AB16b16a)));
  BOOST_CHECK_THROW(PlainToBlocked(plain(d, dt::f16), blocked), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(weight_edges_use_the_loop_where_it_is_vectorised_and_count_the_path) {
  check_weight_edges(kiln::cpu::plain_to_blocked_avx512::has_avx512());
}

BOOST_AUTO_TEST_SUITE_END()

// The same cases through the AVX-512 kernels (gathers, runs, row pairs, 16x16 transposes).
BOOST_FIXTURE_TEST_SUITE(avx512, NeedsAvx512)

BOOST_AUTO_TEST_CASE(fp32_plan_layouts_of_resnet50_match_onednn) { check_fp32_plan_layouts_of_resnet50_match_onednn(true); }
BOOST_AUTO_TEST_CASE(bf16_plan_layouts_of_resnet50_match_onednn) { check_bf16_plan_layouts_of_resnet50_match_onednn(true); }
BOOST_AUTO_TEST_CASE(other_isas_layouts_match_onednn) { check_other_isas_layouts_match_onednn(true); }
BOOST_AUTO_TEST_CASE(padded_channels_get_zeros_in_a_dirty_destination) {
  check_padded_channels_get_zeros_in_a_dirty_destination(true);
}
BOOST_AUTO_TEST_CASE(small_kernels_in_every_vector_layout_match_onednn) {
  check_small_kernels_in_every_vector_layout_match_onednn(true);
}
BOOST_AUTO_TEST_CASE(grouped_weights_match_onednn) { check_grouped_weights_match_onednn(true); }

BOOST_AUTO_TEST_SUITE_END()
