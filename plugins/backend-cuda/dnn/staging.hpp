// Getting operands into the dtype and layout a cuDNN call needs, and results back out.
//
// Decisions: a cuDNN call sees every activation in ONE working layout (the layout tag of its main
// input) and every filter in the matching order (OIHW for NCHW, KRSC for NHWC) in the plan's
// compute dtype; a tensor that already matches is used in place (the normal case: layers give
// the backend's activation_layout()), anything else is converted into workspace memory first
// (f32 master weights read by a bf16/f16 plan, a caller mixing layouts) and outputs written to
// scratch are converted into the caller's tensor afterwards, `+=` for Accumulate::yes. dtype
// changes go through the backend's cast op (round to nearest even, as everywhere), layout
// changes and accumulation through cudnnTransformTensor (y = x + beta * y).
#pragma once

#include "cuda_backend.hpp"
#include "dnn/cudnn_desc.hpp"
#include "dnn/dnn_check.hpp"

namespace kiln::cuda {

/// The same bytes as `t`, as a 1-D row-major tensor (for element-wise ops that ignore layout).
Tensor flat_view(const Tensor& t);
/// `numel` elements of `dtype` at the start of the u8 workspace tensor `ws`.
Tensor typed_view(const Tensor& ws, DType dtype, std::int64_t numel);

/// dst (dims, dst.dtype(), dst_layout) (+)= src (dims, src.dtype(), src_layout), on the compute
/// stream. Layouts are given explicitly because a filter scratch in KRSC is tagged row_major.
void convert_4d(CudaBackend& backend, const DnnCheck& check, const Tensor& dst, Layout dst_layout,
                const Tensor& src, Layout src_layout, Dims4 dims, Accumulate acc);

/// One operand of a cuDNN call: the caller's tensor when it already has the wanted dtype and
/// layout, otherwise workspace scratch. Keep it alive until the call is enqueued (the workspace
/// is stream-ordered, so dropping it afterwards is safe).
class Staged {
 public:
  /// `t` (whose memory order is `t_layout`) as `want` dtype in `want_layout`, converted now if
  /// it differs.
  static Staged input(CudaBackend& backend, const DnnCheck& check, const Tensor& t,
                      Layout t_layout, Dims4 dims, DType want, Layout want_layout);
  /// Where a cuDNN call should write a result destined for `t`: `t` itself when it matches,
  /// otherwise scratch that finish() converts into `t`.
  static Staged output(CudaBackend& backend, const DnnCheck& check, const Tensor& t,
                       Layout t_layout, Dims4 dims, DType want, Layout want_layout);

  void* data() const noexcept { return direct_ ? target_.data() : scratch_.data(); }
  /// Whether the call reads or writes the caller's tensor itself (so cuDNN's beta can
  /// accumulate into it directly).
  bool direct() const noexcept { return direct_; }
  /// For outputs: converts scratch into the caller's tensor, `+=` for Accumulate::yes. Nothing
  /// to do when direct().
  void finish(Accumulate acc);

 private:
  Staged(CudaBackend& backend, const DnnCheck& check) : backend_(&backend), check_(&check) {}

  CudaBackend* backend_;
  const DnnCheck* check_;
  bool direct_ = true;
  Tensor target_;
  Layout target_layout_ = Layout::row_major;
  Tensor scratch_;
  Layout scratch_layout_ = Layout::row_major;
  Dims4 dims_;
};

}  // namespace kiln::cuda
