// Message building for kiln::sdk::OpCheck (sdk/include/kiln/sdk/op_check.hpp): out of line so the
// inline checks stay small. Every message ends with what to do, because the caller is usually a
// layer or a plugin author.
#include "kiln/sdk/op_check.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::sdk {
namespace {

std::string_view layout_words(Layout layout) {
  switch (layout) {
    case Layout::row_major: return "row-major";
    case Layout::nhwc: return "nhwc";
    case Layout::opaque: return "opaque";
  }
  return "unknown";
}

}  // namespace

void OpCheck::fail(const std::string& what) const {
  throw BackendError(fmt::format("{} backend, {}: {}; fix the arguments the calling layer passes",
                                 backend_, op_name(op_), what));
}

void OpCheck::fail_unusable(std::string_view name, const Tensor& t) const {
  if (!t.defined()) fail(fmt::format("{} is undefined but is required", name));
  if (!in_our_memory(t)) {
    if (memory_ == OperandMemory::host) {
      fail(fmt::format("{} {} is in device memory, which the {} backend cannot read", name,
                       t.describe(), backend_));
    }
    fail(fmt::format("{} {} is in host memory, which the {} backend's ops cannot read (copy it to "
                     "the device first: Backend::to_device or copy)",
                     name, t.describe(), backend_));
  }
  if (t.layout() == Layout::nhwc) {
    fail(fmt::format("{} {} is channels-last (nhwc), which this op accepts only for 4-D image "
                     "activations",
                     name, t.describe()));
  }
  fail(fmt::format("{} {} has a backend-private (opaque) layout, which the {} backend cannot read",
                   name, t.describe(), backend_));
}

void OpCheck::fail_dtype(std::string_view name, const Tensor& t, DType want) const {
  fail(fmt::format("{} is {} but must be {}", name, t.describe(), dtype_name(want)));
}

void OpCheck::fail_float_dtype(std::string_view name, const Tensor& t) const {
  fail(fmt::format("{} is {} but must be f32, bf16 or f16", name, t.describe()));
}

void OpCheck::fail_shape(std::string_view name, const Tensor& t, const Shape& want) const {
  fail(fmt::format("{} is {} but must have shape {}", name, t.describe(), shape_string(want)));
}

void OpCheck::fail_rank(std::string_view name, const Tensor& t, int want) const {
  fail(fmt::format("{} is {} but must be {}-D", name, t.describe(), want));
}

void OpCheck::fail_same_shape(std::string_view name, const Tensor& t, std::string_view ref_name,
                              const Tensor& ref) const {
  fail(fmt::format("{} is {} but must have the shape of {} {}", name, t.describe(), ref_name,
                   ref.describe()));
}

void OpCheck::fail_same_numel(std::string_view name, const Tensor& t, std::string_view ref_name,
                              const Tensor& ref) const {
  fail(fmt::format("{} is {} but must have as many elements as {} {}", name, t.describe(),
                   ref_name, ref.describe()));
}

void OpCheck::fail_same_layout(std::string_view name, const Tensor& t, std::string_view ref_name,
                               const Tensor& ref) const {
  fail(fmt::format("{} {} is {} but {} {} is {}; element-wise ops need one layout for all operands "
                   "(allocate them in the backend's activation_layout())",
                   name, t.describe(), layout_words(t.layout()), ref_name, ref.describe(),
                   layout_words(ref.layout())));
}

void OpCheck::fail_row_major(std::string_view name, const Tensor& t) const {
  fail(fmt::format("{} {} is {} but must be row-major", name, t.describe(), layout_words(t.layout())));
}

}  // namespace kiln::sdk
