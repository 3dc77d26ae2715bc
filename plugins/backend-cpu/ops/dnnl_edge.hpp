// Helpers for the planned oneDNN ops (conv2d, batch-norm, pooling): dtype mapping, plain
// descriptors of the caller's row-major tensors, and Edge, one operand at a primitive's boundary.
//
// Decisions: the caller's activations are NCHW (row-major) or NHWC (Layout::nhwc), weights OIHW;
// a primitive may want another layout (weights: oneDNN's blocked one) or another dtype (f16
// operands are computed in f32: this CPU has no f16 arithmetic, so f16 is storage only). An Edge owns that
// inner memory and the cached reorder between it and the caller's memory, both made once when the
// plan builds the primitive; each call only swaps the caller's data pointer. When the layouts and
// dtypes already agree the primitive reads/writes the caller's memory directly (no copy). An
// output edge built with Accumulate::yes support also caches a reorder with a sum post-op, so
// `dst += result` costs one pass and no extra buffer.
#pragma once

#include <optional>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cpu {

/// oneDNN's data type for a float DType (undef for others).
dnnl::memory::data_type dnnl_dtype(DType d);

/// Plain row-major descriptor of `dims` in `d` (nchw for 4-D, oihw for 4-D weights, goihw for 5-D).
dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, DType d);
/// Descriptor of a caller's tensor: plain_desc, or channels-last for a 4-D Layout::nhwc tensor.
dnnl::memory::desc user_desc(const dnnl::memory::dims& dims, DType d, Layout layout);
/// The dtype a primitive computes a `d` operand in: f16 is stored, not computed (f32 inside).
DType compute_dtype(DType d);

/// Whether an output edge must support accumulation into the caller's memory.
enum class EdgeSum : std::uint8_t { no, yes };

class Edge {
 public:
  Edge() = default;
  /// `user` is the caller's (plain) descriptor, `inner` the one the primitive chose.
  Edge(const dnnl::engine& engine, const dnnl::memory::desc& user, const dnnl::memory::desc& inner,
       EdgeSum sum = EdgeSum::no);

  /// Points the edge at the caller's tensor data for this call.
  void bind(void* data);
  /// The memory the primitive reads or writes.
  const dnnl::memory& inner() const { return inner_; }
  /// Input edge: brings the caller's data into the inner memory (no-op when they are one).
  void pull(dnnl::stream& stream);
  /// Output edge: writes (or, with Accumulate::yes, adds) the inner memory into the caller's.
  void push(dnnl::stream& stream, Accumulate acc = Accumulate::no);

 private:
  bool direct_ = true;
  dnnl::memory user_, inner_;
  std::optional<dnnl::reorder> to_inner_, to_user_, add_to_user_;
};

}  // namespace kiln::cpu
