// Whether a oneDNN memory descriptor is the plain, dense, row-major layout (no inner blocks, no
// offset, no padding, strides the running products of the dims): the plain side both of Kiln's
// weight loops (plain_to_blocked, blocked_to_plain) require.
#pragma once

#include <cstdint>

#include "ops/onednn_compat.hpp"

namespace kiln::cpu {

inline bool dense_row_major(const onednn::Blocking& d) {
  if (!d.blocked || d.inner_nblks != 0 || d.offset0 != 0) return false;
  std::int64_t stride = 1;
  for (int i = d.ndims - 1; i >= 0; --i) {
    if (d.padded_dims[i] != d.dims[i] || d.strides[i] != stride) return false;
    stride *= d.dims[i];
  }
  return true;
}

}  // namespace kiln::cpu
