// Message building for OpCheck (validate.hpp): out of line so the inline checks stay small.
// Every message ends with what to do, because the caller is usually a layer or a plugin author.
#include "validate.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::cpu {

void OpCheck::fail(const std::string& what) const {
  throw BackendError(fmt::format("cpu backend, {}: {}; fix the arguments the calling layer passes",
                                 op_name(op_), what));
}

void OpCheck::fail_unusable(std::string_view name, const Tensor& t) const {
  if (!t.defined()) fail(fmt::format("{} is undefined but is required", name));
  if (t.memory() == MemoryKind::device) {
    fail(fmt::format("{} {} is in device memory, which the cpu backend cannot read", name,
                     t.describe()));
  }
  if (t.layout() == Layout::nhwc) {
    fail(fmt::format("{} {} is channels-last (nhwc), which this op accepts only for 4-D image "
                     "activations", name, t.describe()));
  }
  fail(fmt::format("{} {} has another backend's opaque layout, which the cpu backend cannot read",
                   name, t.describe()));
}

void OpCheck::fail_same_layout(std::string_view name, const Tensor& t, std::string_view ref_name,
                               const Tensor& ref) const {
  const auto layout = [](const Tensor& x) { return x.layout() == Layout::nhwc ? "nhwc" : "row-major"; };
  fail(fmt::format("{} {} is {} but {} {} is {}; element-wise ops need one layout for all operands",
                   name, t.describe(), layout(t), ref_name, ref.describe(), layout(ref)));
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

}  // namespace kiln::cpu
