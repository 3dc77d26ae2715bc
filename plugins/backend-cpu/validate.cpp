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
  fail(fmt::format("{} {} has a non-row-major layout, which the cpu backend does not use", name,
                   t.describe()));
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
