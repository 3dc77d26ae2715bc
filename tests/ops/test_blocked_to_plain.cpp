// The cpu backend's blocked -> plain f32 loop (plugins/backend-cpu/ops/blocked_to_plain.cpp),
// compiled into this test, against oneDNN's own reorder of the same memory, bit for bit (a copy
// or one f32 addition per element): the layouts oneDNN 2.6 picks for ResNet-50's weights and
// weight gradients on AVX-512 (ABcd16b16a, Acdb16a, AcdB64a2b, ABcd8a16b2a, BAcd8a16b2a),
// grouped 5-D weights, dims that are not multiples of the blocks (padded layouts), with and
// without accumulation; and the descriptors it must refuse.
#define KILN_TEST_MODULE test_blocked_to_plain
#include "kiln_test_main.hpp"

#include <cstring>
#include <random>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "ops/blocked_to_plain.hpp"

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using kiln::cpu::BlockedToPlain;

dnnl::memory::desc plain(const dims& d, dt type = dt::f32) {
  return dnnl::memory::desc(d, type, d.size() == 4 ? tag::abcd : tag::abcde);
}

/// Runs BlockedToPlain and oneDNN's reorder (with a sum post-op when accumulating) on the same
/// random blocked source and the same random destination, and compares every element.
void check_against_reorder(const dims& d, tag blocked_tag, bool accumulate) {
  BOOST_TEST_CONTEXT("dims " << d.size() << "-D, first " << d[0] << ", tag " << static_cast<int>(blocked_tag)
                             << (accumulate ? ", accumulate" : ", overwrite")) {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const dnnl::memory::desc blocked(d, dt::f32, blocked_tag), user = plain(d);
    BOOST_TEST_REQUIRE(BlockedToPlain::handles(blocked, user));

    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    dnnl::memory src(blocked, engine);
    auto* s = static_cast<float*>(src.get_data_handle());
    for (std::size_t i = 0; i < blocked.get_size() / sizeof(float); ++i) s[i] = u(rng);
    std::vector<float> start(user.get_size() / sizeof(float));
    for (float& x : start) x = u(rng);

    dnnl::memory expected(user, engine);
    std::memcpy(expected.get_data_handle(), start.data(), user.get_size());
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::reorder(dnnl::reorder::primitive_desc(engine, blocked, engine, user, attr)).execute(stream, src, expected);
    stream.wait();

    std::vector<float> got = start;
    BlockedToPlain(blocked).run(s, got.data(), accumulate);

    const auto* want = static_cast<const float*>(expected.get_data_handle());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && ++mismatches <= 5) {
        BOOST_TEST(got[i] == want[i], "element " << i);
      }
    }
    BOOST_TEST(mismatches == 0u);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(weight_gradient_layouts_match_onednn_reorder) {
  for (bool accumulate : {true, false}) {
    check_against_reorder({64, 3, 7, 7}, tag::Acdb16a, accumulate);        // ResNet's stem
    check_against_reorder({256, 64, 1, 1}, tag::ABcd16b16a, accumulate);   // 1x1
    check_against_reorder({128, 128, 3, 3}, tag::ABcd16b16a, accumulate);  // 3x3
  }
}

BOOST_AUTO_TEST_CASE(forward_and_backward_data_weight_layouts_match) {
  check_against_reorder({128, 64, 3, 3}, tag::AcdB64a2b, true);
  check_against_reorder({64, 128, 3, 3}, tag::ABcd8a16b2a, true);
  check_against_reorder({64, 128, 1, 1}, tag::BAcd8a16b2a, false);
}

BOOST_AUTO_TEST_CASE(padded_blocks_read_only_the_real_elements) {
  // 20 and 33 are no multiples of 16 or 64: the blocked buffers are padded.
  check_against_reorder({20, 33, 3, 3}, tag::ABcd16b16a, true);
  check_against_reorder({20, 33, 3, 2}, tag::AcdB64a2b, true);
  check_against_reorder({5, 3, 1, 1}, tag::ABcd16b16a, false);
}

BOOST_AUTO_TEST_CASE(grouped_weights) {
  check_against_reorder({2, 32, 16, 3, 3}, tag::gOIhw16i16o, true);
  check_against_reorder({3, 20, 24, 1, 1}, tag::gOIhw16i16o, false);
}

BOOST_AUTO_TEST_CASE(refuses_what_it_does_not_handle) {
  const dims d{32, 32, 3, 3};
  const dnnl::memory::desc blocked(d, dt::f32, tag::ABcd16b16a);
  // A destination that is not dense row-major, or not f32, or of other dims.
  BOOST_TEST(!BlockedToPlain::handles(blocked, dnnl::memory::desc(d, dt::f32, tag::acdb)));
  BOOST_TEST(!BlockedToPlain::handles(blocked, plain(d, dt::bf16)));
  BOOST_TEST(!BlockedToPlain::handles(blocked, plain({32, 32, 3, 1})));
  // A source that is bf16, or has no inner blocks (nhwc activations keep oneDNN's reorder).
  BOOST_TEST(!BlockedToPlain::handles(dnnl::memory::desc(d, dt::bf16, tag::ABcd16b16a), plain(d)));
  BOOST_TEST(!BlockedToPlain::handles(dnnl::memory::desc(d, dt::f32, tag::acdb), plain(d)));
  // 2-D tensors are not weights of a convolution.
  BOOST_TEST(!BlockedToPlain::handles(dnnl::memory::desc({32, 32}, dt::f32, tag::AB16b16a),
                                      dnnl::memory::desc({32, 32}, dt::f32, tag::ab)));
}
