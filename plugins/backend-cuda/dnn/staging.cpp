// Operand staging for the cuDNN ops (staging.hpp): flat views, convert_4d and Staged.
#include "dnn/staging.hpp"

#include <fmt/format.h>

#include "cuda_check.hpp"

namespace kiln::cuda {

Tensor flat_view(const Tensor& t) {
  return Tensor(t.storage(), {t.numel()}, t.dtype(), t.offset_bytes());
}

Tensor typed_view(const Tensor& ws, DType dtype, std::int64_t numel) {
  return Tensor(ws.storage(), {numel}, dtype, ws.offset_bytes());
}

void convert_4d(CudaBackend& backend, const DnnCheck& check, const Tensor& dst, Layout dst_layout,
                const Tensor& src_in, Layout src_layout, Dims4 dims, Accumulate acc) {
  const std::int64_t numel = dims.numel();
  if (numel == 0) return;
  const auto what = [&] {
    return fmt::format("converting {} ({}) into {} ({}) as ({}, {}, {}, {}){}", src_in.describe(),
                       layout_word(src_layout), dst.describe(), layout_word(dst_layout), dims.n,
                       dims.c, dims.h, dims.w, acc == Accumulate::yes ? " with accumulation" : "");
  };
  Tensor src = src_in;
  Tensor cast_scratch;  // keeps the intermediate alive until the transform is enqueued
  if (src.dtype() != dst.dtype()) {
    if (src_layout == dst_layout && acc == Accumulate::no) {
      backend.cast(flat_view(dst), flat_view(src));
      return;
    }
    cast_scratch = backend.workspace(static_cast<std::size_t>(numel) * dtype_size(dst.dtype()));
    Tensor converted = typed_view(cast_scratch, dst.dtype(), numel);
    backend.cast(converted, flat_view(src));
    src = converted;
  }
  if (src_layout == dst_layout && acc == Accumulate::no) {
    if (src.data() != dst.data()) {
      check_cuda(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(numel) * dtype_size(dst.dtype()),
                                 cudaMemcpyDeviceToDevice, backend.compute_stream()),
                 fmt::format("cuda backend, {}: cudaMemcpyAsync {}", op_name(check.op()), what()));
    }
    return;
  }
  TensorDesc src_desc, dst_desc;
  src_desc.set(check, dims, dst.dtype(), src_layout);
  dst_desc.set(check, dims, dst.dtype(), dst_layout);
  const float one = 1.0f, beta = acc == Accumulate::yes ? 1.0f : 0.0f;
  check.cudnn(cudnnTransformTensor(backend.cudnn(), &one, src_desc.get(), src.data(), &beta,
                                   dst_desc.get(), dst.data()),
              [&] { return "cudnnTransformTensor " + what(); });
}

Staged Staged::input(CudaBackend& backend, const DnnCheck& check, const Tensor& t, Layout t_layout,
                     Dims4 dims, DType want, Layout want_layout) {
  Staged s(backend, check);
  s.target_ = t;
  s.target_layout_ = t_layout;
  s.dims_ = dims;
  if (t.dtype() == want && t_layout == want_layout) return s;
  s.direct_ = false;
  Tensor ws = backend.workspace(static_cast<std::size_t>(dims.numel()) * dtype_size(want));
  s.scratch_ = typed_view(ws, want, dims.numel());
  s.scratch_layout_ = want_layout;
  convert_4d(backend, check, s.scratch_, want_layout, t, t_layout, dims, Accumulate::no);
  return s;
}

Staged Staged::output(CudaBackend& backend, const DnnCheck& check, const Tensor& t, Layout t_layout,
                      Dims4 dims, DType want, Layout want_layout) {
  Staged s(backend, check);
  s.target_ = t;
  s.target_layout_ = t_layout;
  s.dims_ = dims;
  if (t.dtype() == want && t_layout == want_layout) return s;
  s.direct_ = false;
  Tensor ws = backend.workspace(static_cast<std::size_t>(dims.numel()) * dtype_size(want));
  s.scratch_ = typed_view(ws, want, dims.numel());
  s.scratch_layout_ = want_layout;
  return s;
}

void Staged::finish(Accumulate acc) {
  if (direct_) return;
  convert_4d(*backend_, *check_, target_, target_layout_, scratch_, scratch_layout_, dims_, acc);
}

}  // namespace kiln::cuda
