// Conformance case of convert_layout: NCHW -> NHWC, NHWC -> NCHW and an equal-layout copy, in
// f32, bf16 and f16. The op only moves elements, so results are judged exactly: fetch() decodes
// dst by its layout tag, so a backend that copied bytes without rearranging them fails. One
// small odd shape and one large enough for a CPU to split across threads and tiles.
#include <string>

#include "harness.hpp"

namespace kiln::conformance {
namespace {

std::string direction(Layout from, Layout to) {
  return std::string(layout_label(from)) + " -> " + layout_label(to);
}

void convert_layout_case(const Variant& v) {
  const DType d = v.dtype;
  Rng rng(31);
  for (const Shape& shape : {Shape{2, 5, 3, 7}, Shape{3, 67, 9, 11}}) {
    const auto n = static_cast<std::size_t>(shape_numel(shape));
    const auto x = uniform(rng, n, -8, 8, d);
    for (const Layout from : {Layout::row_major, Layout::nhwc}) {
      for (const Layout to : {Layout::row_major, Layout::nhwc}) {
        const Tensor dst = poisoned(shape, d, to);
        backend().convert_layout(dst, upload(x, shape, d, from));
        expect_equal(fetch(dst), x, direction(from, to) + " " + shape_string(shape));
      }
    }
  }
}

}  // namespace

void add_layout_cases(CaseList& cases) {
  cases.add("convert_layout", {Op::convert_layout}, Axes::dtypes, convert_layout_case);
}

}  // namespace kiln::conformance
