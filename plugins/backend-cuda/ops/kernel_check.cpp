// Message building for KernelCheck (kernel_check.hpp), out of line so the inline checks stay
// small. Wording follows the cpu backend's OpCheck so users see one style from either backend.
#include "ops/kernel_check.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::cuda {
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

void KernelCheck::fail(const std::string& what) const {
  throw BackendError(fmt::format("cuda backend, {}: {}; fix the arguments the calling layer passes",
                                 op_name(op_), what));
}

void KernelCheck::fail_unusable(std::string_view name, const Tensor& t) const {
  if (!t.defined()) fail(fmt::format("{} is undefined but is required", name));
  if (t.memory() != MemoryKind::device) {
    fail(fmt::format("{} {} is in host memory, which the cuda backend's kernels cannot read (copy "
                     "it to the device with Backend::to_device or copy first)",
                     name, t.describe()));
  }
  fail(fmt::format("{} {} has an opaque (backend-private) layout, which the cuda backend does not "
                   "use",
                   name, t.describe()));
}

void KernelCheck::fail_dtype(std::string_view name, const Tensor& t, DType want) const {
  fail(fmt::format("{} is {} but must be {}", name, t.describe(), dtype_name(want)));
}

void KernelCheck::fail_float_dtype(std::string_view name, const Tensor& t) const {
  fail(fmt::format("{} is {} but must be f32, bf16 or f16", name, t.describe()));
}

void KernelCheck::fail_shape(std::string_view name, const Tensor& t, const Shape& want) const {
  fail(fmt::format("{} is {} but must have shape {}", name, t.describe(), shape_string(want)));
}

void KernelCheck::fail_rank(std::string_view name, const Tensor& t, int want) const {
  fail(fmt::format("{} is {} but must be {}-D", name, t.describe(), want));
}

void KernelCheck::fail_same_shape(std::string_view name, const Tensor& t, std::string_view ref_name,
                                  const Tensor& ref) const {
  fail(fmt::format("{} is {} but must have the shape of {} {}", name, t.describe(), ref_name,
                   ref.describe()));
}

void KernelCheck::fail_same_numel(std::string_view name, const Tensor& t, std::string_view ref_name,
                                  const Tensor& ref) const {
  fail(fmt::format("{} is {} but must have as many elements as {} {}", name, t.describe(),
                   ref_name, ref.describe()));
}

void KernelCheck::fail_same_layout(std::string_view name, const Tensor& t,
                                   std::string_view ref_name, const Tensor& ref) const {
  fail(fmt::format("{} {} is {} but {} {} is {}; element-wise operands must share a layout "
                   "(allocate both in the backend's activation_layout())",
                   name, t.describe(), layout_words(t.layout()), ref_name, ref.describe(),
                   layout_words(ref.layout())));
}

void KernelCheck::fail_row_major(std::string_view name, const Tensor& t) const {
  fail(fmt::format("{} {} is {} but must be row-major", name, t.describe(),
                   layout_words(t.layout())));
}

}  // namespace kiln::cuda
