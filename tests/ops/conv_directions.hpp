// Runs one convolution plan in all three directions on random operands, for the suites that
// compare two ways of computing the same convolution (test_conv3x3_winograd.cpp,
// test_conv3x3_kiln_winograd.cpp, ...): the same seed gives both backends the same operands, and
// the results say which path each call ran (the backend's own counters: two paths may give the
// same bits, so bits cannot tell).
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "cpu_fixture.hpp"
#include "kiln/backend.hpp"

namespace kiln::test {

struct ConvResults {
  Tensor y, dx, dw, dw_added;
  /// The paths the four calls ran, "direction/path" -> calls (cpu_fixture.hpp).
  ConvPathCounts paths;
};

/// The path each call of `direction` ran (cpu_fixture.hpp's path_of).
inline std::string path_of(const ConvResults& r, const std::string& direction) { return path_of(r.paths, direction); }

/// The dtypes the operands are stored in, where not the plan's own: a bf16 plan of a
/// mixed-precision model reads f32 master weights and writes f32 weight gradients; a 16-bit plan
/// may also read 16-bit weights and write f32 gradients (`gradients`, else the weights' dtype).
struct OperandDtypes {
  DType activations, weights;
  std::optional<DType> gradients{};
};

/// Forward, backward-data, backward-filter (written, then added into dw0) on activations in
/// `layout` (channels-last as the ResNet models pass them; NCHW as tests may), every operand of
/// dtype `d.dtype` unless `dtypes` says otherwise (activations: x, dy, y, dx; weights: w, and dw
/// unless `gradients` is given).
inline ConvResults run_directions(Backend& backend, const Conv2dDesc& d, std::mt19937::result_type seed,
                                  Layout layout = Layout::nhwc, std::optional<OperandDtypes> dtypes = {}) {
  const OperandDtypes dt = dtypes.value_or(OperandDtypes{d.dtype, d.dtype});
  std::mt19937 rng(seed);
  const auto act = [&](const Shape& s) {
    const Tensor t = random_f32(s, rng);
    return to_dtype(layout == Layout::nhwc ? to_channels_last(t) : t, dt.activations);
  };
  const Tensor x = act({d.n, d.c, d.h, d.w}), dy = act({d.n, d.k, d.out_h(), d.out_w()});
  const Tensor w = to_dtype(random_f32({d.k, d.c, d.r, d.s}, rng), dt.weights);
  const DType grads = dt.gradients.value_or(dt.weights);
  ConvResults r{poisoned(dy.shape(), dt.activations).with_layout(layout),
                poisoned(x.shape(), dt.activations).with_layout(layout), poisoned(w.shape(), grads),
                to_dtype(random_f32(w.shape(), rng), grads), {}};
  const ConvPathCounts before = conv_path_counts(backend);
  auto plan = backend.plan_conv2d(d);
  backend.conv2d_forward(*plan, r.y, x, w);
  backend.conv2d_backward_data(*plan, r.dx, dy, w);
  backend.conv2d_backward_filter(*plan, r.dw, dy, x, Accumulate::no);
  backend.conv2d_backward_filter(*plan, r.dw_added, dy, x, Accumulate::yes);
  r.paths = conv_paths_since(before, conv_path_counts(backend));
  return r;
}

inline bool same_bits(const Tensor& a, const Tensor& b) { return std::memcmp(a.data(), b.data(), a.bytes()) == 0; }
inline bool same_bits(const ConvResults& a, const ConvResults& b) {
  return same_bits(a.y, b.y) && same_bits(a.dx, b.dx) && same_bits(a.dw, b.dw) && same_bits(a.dw_added, b.dw_added);
}

/// A square convolution: batch n, c -> k channels, side x side input, r x r kernel.
inline Conv2dDesc conv(std::int64_t n, std::int64_t c, std::int64_t side, std::int64_t k, std::int64_t r,
                       std::int64_t stride, std::int64_t pad, DType dtype = DType::f32) {
  Conv2dDesc d;
  d.n = n, d.c = c, d.h = d.w = side, d.k = k, d.r = d.s = r;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad, d.dtype = dtype;
  return d;
}

/// A square convolution of batch 2 with "same" padding (r / 2).
inline Conv2dDesc square_conv(std::int64_t c, std::int64_t k, std::int64_t side, std::int64_t r, std::int64_t stride,
                DType dtype = DType::f32) {
  Conv2dDesc d;
  d.n = 2, d.c = c, d.h = d.w = side, d.k = k, d.r = d.s = r;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = r / 2, d.dtype = dtype;
  return d;
}

/// Checks that two ways of computing the same convolution agree within `bound` of the largest
/// value in every output (forward, backward-data, backward-filter written and added), and logs the
/// differences.
inline void check_agree(const ConvResults& got, const ConvResults& want, double bound) {
  BOOST_TEST_MESSAGE("difference relative to the largest |value|: y " << relative_difference(got.y, want.y)
                     << ", dx " << relative_difference(got.dx, want.dx) << ", dw "
                     << relative_difference(got.dw, want.dw));
  BOOST_TEST(relative_difference(got.y, want.y) < bound);
  BOOST_TEST(relative_difference(got.dx, want.dx) < bound);
  BOOST_TEST(relative_difference(got.dw, want.dw) < bound);
  BOOST_TEST(relative_difference(got.dw_added, want.dw_added) < bound);
}

}  // namespace kiln::test
