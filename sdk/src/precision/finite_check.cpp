// The finite check of reduced gradients (finite_check.hpp).
#include "kiln/sdk/finite_check.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "kiln/errors.hpp"

namespace kiln::sdk {

bool FiniteCheck::all_finite(Backend& backend, std::span<const Tensor> tensors) {
  if (!flag_.defined()) {
    flag_ = backend.allocate({1}, DType::i32, MemoryKind::device);
    flag_host_ = host_tensor({1}, DType::i32);
  }
  backend.fill(flag_, 0.0);
  for (const Tensor& t : tensors) backend.check_finite(flag_, t);
  backend.copy(flag_, flag_host_);  // a copy into host memory is complete when it returns
  return flag_host_.data_as<std::int32_t>()[0] == 0;
}

void FiniteCheck::throw_nonfinite(Backend& backend, std::span<const Parameter> params) {
  for (const Parameter& p : params) {
    if (!all_finite(backend, std::span<const Tensor>(&p.grad, 1))) {
      throw NumericError(fmt::format("gradient of '{}' is not finite (inf or NaN) after the all-reduce; lower the "
                                     "learning rate or check the input data",
                                     p.name));
    }
  }
  // Every parameter is finite, so the inf/NaN is in a gap of an arena, which nothing should write.
  throw NumericError("a gradient arena holds inf or NaN outside every parameter after the all-reduce; the model "
                     "wrote past a parameter's gradient");
}

}  // namespace kiln::sdk
