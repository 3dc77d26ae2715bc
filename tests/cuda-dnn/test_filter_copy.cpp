// FilterCopyLedger (plugins/backend-cuda/dnn/filter_copy.hpp): when a convolution's backward-data
// call may read the filter copy its forward made. Plain C++, no GPU.
#include <boost/test/unit_test.hpp>

#include "dnn/filter_copy.hpp"

using kiln::DType;
using kiln::Layout;
using kiln::cuda::FilterCopyLedger;
using kiln::cuda::FilterUse;

namespace {

float weights[64];
float other_weights[64];

FilterUse bf16_nhwc(const void* data = weights, std::int64_t numel = 64) {
  return FilterUse{data, numel, DType::bf16, DType::bf16, Layout::nhwc};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(filter_copy)

BOOST_AUTO_TEST_CASE(nothing_is_reused_before_a_forward) {
  FilterCopyLedger l;
  BOOST_TEST(!l.holds());
  BOOST_TEST(!l.take_for_backward(bf16_nhwc()));
}

BOOST_AUTO_TEST_CASE(the_backward_after_its_forward_reuses_the_copy_once) {
  FilterCopyLedger l;
  l.forward_begins();
  l.copy_made(bf16_nhwc());
  BOOST_TEST(l.holds());
  BOOST_TEST(l.take_for_backward(bf16_nhwc()));
  // Consumed: a second backward-data call (no forward in between) converts the weights again,
  // so it sees whatever they hold now.
  BOOST_TEST(!l.holds());
  BOOST_TEST(!l.take_for_backward(bf16_nhwc()));
  // The next step's forward makes a new copy, which its backward reuses.
  l.forward_begins();
  l.copy_made(bf16_nhwc());
  BOOST_TEST(l.take_for_backward(bf16_nhwc()));
}

BOOST_AUTO_TEST_CASE(only_the_identical_use_reuses_and_a_mismatch_releases_the_copy) {
  const FilterUse made = bf16_nhwc();
  FilterUse other_tensor = made, fewer = made, other_dtype = made, other_want = made, other_layout = made;
  other_tensor.data = other_weights;
  fewer.numel = 32;  // a view starting at the same address
  other_dtype.dtype = DType::f32;
  other_want.want_dtype = DType::f16;
  other_layout.want_layout = Layout::row_major;
  for (const FilterUse& asked : {other_tensor, fewer, other_dtype, other_want, other_layout}) {
    FilterCopyLedger l;
    l.forward_begins();
    l.copy_made(made);
    BOOST_TEST(!l.take_for_backward(asked));
    // Released by the mismatch: even the matching use converts again now.
    BOOST_TEST(!l.take_for_backward(made));
  }
}

BOOST_AUTO_TEST_CASE(a_forward_without_a_copy_forgets_the_previous_one) {
  // Plans are per layer and batch size, but a model may share one between layers of one shape: B's
  // forward replaces A's copy, so A's backward converts its own weights again.
  FilterCopyLedger l;
  l.forward_begins();
  l.copy_made(bf16_nhwc(weights));
  l.forward_begins();
  l.copy_made(bf16_nhwc(other_weights));
  BOOST_TEST(!l.take_for_backward(bf16_nhwc(weights)));

  // A forward that reads the weights in place (or throws before its conversion finished) leaves
  // nothing a later backward could take for its own.
  l.forward_begins();
  l.copy_made(bf16_nhwc());
  l.forward_begins();
  BOOST_TEST(!l.holds());
  BOOST_TEST(!l.take_for_backward(bf16_nhwc()));
}

BOOST_AUTO_TEST_SUITE_END()
