// Build-time capability check shared by every layer.
#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "kiln/sdk/nn/layers.hpp"

namespace kiln::nn {

void require_op(const Backend& backend, Op op, DType dtype, const char* layer) {
  if (!backend.supports(op, dtype)) {
    throw UnsupportedError(fmt::format("{} needs op {} for {}, which backend '{}' does not implement",
                                       layer, op_name(op), dtype_name(dtype), backend.name()));
  }
}

}  // namespace kiln::nn
