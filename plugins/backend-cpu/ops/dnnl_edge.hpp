// Helpers for the planned oneDNN ops (conv2d, batch-norm, pooling): dtype mapping, plain
// descriptors of the caller's row-major tensors, and Edge, one operand at a primitive's boundary.
//
// Decisions: the caller's activations are NCHW (row-major) or NHWC (Layout::nhwc), weights OIHW;
// a primitive may want another layout (weights: oneDNN's blocked one) or another dtype (f16
// operands are computed in f32: this CPU has no f16 arithmetic, so f16 is storage only). An Edge
// caches the reorder between the caller's memory and what the primitive reads or writes, made once
// when the plan builds the primitive; each call only swaps the caller's data pointer. When the
// layouts and dtypes already agree the primitive reads/writes the caller's memory directly (no
// copy). Otherwise the inner memory comes from an EdgeScratch the whole backend shares: an edge
// needs it only during the op that uses it and ops run one at a time, so one buffer per slot (an
// op's edges use distinct slots) serves every plan, instead of each plan keeping its own blocked
// copy of its weights and weight gradients (300 MB for ResNet-50 in f32). An output edge built
// with Accumulate::yes support also caches a reorder with a sum post-op, so `dst += result` costs
// one pass and no extra buffer. An f32 output whose inner layout is blocked (a convolution's
// weight gradient) is written or added by Kiln's own loop instead (blocked_to_plain.hpp): oneDNN
// 2.6's transposing reorders run at a fraction of the memory bandwidth there.
//
// The other direction, the caller's OIHW weights into the primitive's blocked layout on every
// forward and backward-data call, is Kiln's own loop too where it has a vector kernel for the
// layout (plain_to_blocked.hpp), and oneDNN's reorder otherwise; weight_reorder_counts() counts
// which path each pull took.
//
// f16 edges (caller f16, primitive f32) never use a oneDNN reorder for the dtype change: oneDNN
// 2.6 converts f16 with its reference reorder on CPUs without AVX512-FP16, which made f16 conv
// models 40-70x slower than f32. The conversion runs in Kiln's own vector loops
// (f16_convert.hpp) into an f32 copy in the caller's layout (the "wide" buffer, scratch slot
// slot + kWideSlot); if the primitive wants another layout too, an f32 -> f32 reorder follows,
// which oneDNN does with its JIT kernels.
//
// bf16 edges work the same way (bf16_convert.hpp) where the backend has no bf16 primitives
// (oneDNN 2.6 needs AVX-512 for them; compute_dtype says f32 then): bf16 is storage only there.
// An f32 input of a bf16 op computed in f32 (a convolution reading f32 master weights) is
// rounded to bf16 precision in its wide copy (EdgeRound::bf16), so the op sees exactly the values
// a bf16 primitive would have read.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/ops.hpp"
#include "ops/blocked_to_plain.hpp"
#include "ops/plain_to_blocked.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cpu {

/// oneDNN's data type for a float DType (undef for others).
dnnl::memory::data_type dnnl_dtype(DType d);

/// Plain row-major descriptor of `dims` in `d` (nchw for 4-D, oihw for 4-D weights, goihw for 5-D).
dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, DType d);
/// Descriptor of a caller's tensor: plain_desc, or channels-last for a 4-D Layout::nhwc tensor.
dnnl::memory::desc user_desc(const dnnl::memory::dims& dims, DType d, Layout layout);
/// The dtype a primitive computes a `d` operand in: f16 is stored, not computed (f32 inside), and
/// so is bf16 when the backend has no bf16 primitives (`bf16_primitives` false: oneDNN has no bf16
/// kernels on this CPU, or the backend was told bf16_compute = "f32").
DType compute_dtype(DType d, bool bf16_primitives);

/// Growable 64-byte-aligned buffers, one per slot, shared by the edges of every plan of a backend.
/// Not thread-safe (ops are issued by one thread).
class EdgeScratch {
 public:
  /// At least `bytes` bytes for `slot`; valid until the next get() of the same slot.
  void* get(int slot, std::size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const noexcept;
  };
  struct Block {
    std::unique_ptr<void, Free> data;
    std::size_t bytes = 0;
  };
  std::vector<Block> slots_;
};

/// Whether an output edge must support accumulation into the caller's memory.
enum class EdgeSum : std::uint8_t { no, yes };

/// Whether an f32 input edge rounds the caller's values to bf16 precision (an f32 operand of a bf16
/// op whose primitive computes in f32; the primitive must be f32 too).
enum class EdgeRound : std::uint8_t { none, bf16 };

/// How an edge makes the f32 copy the primitive reads: not at all, by widening f16 or bf16, or by
/// rounding f32 to bf16 precision (EdgeRound::bf16).
enum class EdgeWide : std::uint8_t { none, f16, bf16, f32_as_bf16 };

class Edge {
 public:
  /// Scratch slots of the f32 copies of f16 operands are this far above the edge's own slot.
  static constexpr int kWideSlot = 16;

  Edge() = default;
  /// `user` is the caller's (plain) descriptor, `inner` the one the primitive chose; a
  /// non-direct edge takes its inner memory from `scratch` slot `slot` at each bind().
  Edge(const dnnl::engine& engine, const dnnl::memory::desc& user, const dnnl::memory::desc& inner,
       std::shared_ptr<EdgeScratch> scratch, int slot, EdgeSum sum = EdgeSum::no,
       EdgeRound round = EdgeRound::none);

  /// Points the edge at the caller's tensor data (and its scratch) for this call. Bind every
  /// edge of an op before pulling any of them.
  void bind(void* data);
  /// The memory the primitive reads or writes.
  const dnnl::memory& inner() const { return inner_; }
  /// Input edge: brings the caller's data into the inner memory (no-op when they are one).
  void pull(dnnl::stream& stream);
  /// Output edge: writes (or, with Accumulate::yes, adds) the inner memory into the caller's.
  void push(dnnl::stream& stream, Accumulate acc = Accumulate::no);

 private:
  void init_widening(const dnnl::engine& engine, const dnnl::memory::desc& user, const dnnl::memory::desc& inner,
                     EdgeSum sum);
  /// plain -> inner for pull(): Kiln's loop where it has a vector kernel, else a oneDNN reorder.
  void init_to_inner(const dnnl::engine& engine, const dnnl::memory::desc& plain, const dnnl::memory::desc& inner);
  /// Runs the plain -> inner step of pull() and counts which path ran (weight_reorder_counts()).
  void to_inner(dnnl::stream& stream, dnnl::memory& plain);

 private:
  bool direct_ = true;
  EdgeWide wide_ = EdgeWide::none;  // f16/bf16 caller (or rounded f32), f32 primitive
  bool wide_is_inner_ = false;  // the f32 copy is the primitive's memory itself (same layout, no sum)
  dnnl::memory user_, inner_, wide_mem_;
  std::shared_ptr<EdgeScratch> scratch_;
  int slot_ = 0;
  std::optional<dnnl::reorder> to_inner_, to_user_, add_to_user_;
  std::optional<BlockedToPlain> blocked_to_user_;  // replaces to_user_/add_to_user_ where it applies
  std::optional<PlainToBlocked> plain_to_inner_;   // replaces to_inner_ where it has a vector kernel
  bool inner_blocked_ = false;                     // inner has inner blocks (a weight layout)
};

/// A oneDNN primitive with an edge per operand (two inputs, one output): what the convolution
/// plans and the 1x1 matmuls (conv1x1_matmul.hpp) run per direction. `with_sum`, where present,
/// is the same primitive with a sum post-op on a direct output edge: an accumulating run uses it,
/// so the sum lands in the caller's memory and the output edge has nothing to push.
struct EdgedPrimitive {
  dnnl::primitive prim;
  std::optional<dnnl::primitive> with_sum;
  Edge e0, e1, eo;
  std::unordered_map<int, dnnl::memory> args;

  /// Binds the callers' data, brings the inputs in, runs, and writes (or adds) the output.
  void run(dnnl::stream& stream, void* a, void* b, void* o, Accumulate acc = Accumulate::no);
};

}  // namespace kiln::cpu
