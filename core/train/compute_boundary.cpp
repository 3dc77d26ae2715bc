// The trainer's casts at the model boundary (see compute_boundary.hpp for who casts what).
#include "kiln/train/compute_boundary.hpp"

#include <fmt/format.h>

#include <utility>

#include "kiln/backend.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/nn/layers.hpp"

namespace kiln::train {
namespace {

bool is_floating(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64; }

}  // namespace

void ComputeBoundary::build(Backend& backend, DType compute, const InputSpec& spec, std::int64_t max_batch,
                            std::string model) {
  backend_ = &backend;
  compute_ = compute;
  model_ = std::move(model);
  max_batch_ = max_batch;
  sample_numel_ = shape_numel(spec.sample_shape);
  classes_ = spec.num_classes;
  input_ = logits_f32_ = dlogits_ = Tensor();
  if (compute == DType::f32) return;  // fp32: the model's own tensors cross unchanged
  nn::require_op(backend, Op::cast, compute, "the trainer (input, logits and dlogits casts)");
  // Flat per sample: a data source may deliver (1, 28, 28) for a model that declares (784); the
  // cast keeps the batch's own shape (input() reshapes a view), so the model sees under bf16
  // exactly the shape it sees under fp32.
  if (is_floating(spec.dtype)) input_ = backend.allocate({max_batch, sample_numel_}, compute, MemoryKind::device);
  logits_f32_ = backend.allocate({max_batch, classes_}, DType::f32, MemoryKind::device);
  dlogits_ = backend.allocate({max_batch, classes_}, compute, MemoryKind::device);
}

std::int64_t ComputeBoundary::batch_rows(const Tensor& t, const char* what) const {
  if (backend_ == nullptr) throw BackendError("ComputeBoundary used before build()");
  const std::int64_t b = t.rank() > 0 ? t.dim(0) : 0;
  if (b < 1 || b > max_batch_) {
    throw BackendError(fmt::format("model '{}': {} {} has {} rows, but the trainer sized its casts for 1..{}",
                                   model_, what, t.describe(), b, max_batch_));
  }
  return b;
}

Tensor ComputeBoundary::input(const Tensor& x) {
  // Integer input (u8 images) is the model's to convert: it normalises straight into the compute
  // dtype on the device, which a cast here would only make slower.
  if (!is_floating(x.dtype()) || x.dtype() == compute_) return x;
  const std::int64_t b = batch_rows(x, "input");
  if (!input_.defined() || x.numel() != b * sample_numel_) {
    throw BackendError(fmt::format("model '{}': input {} is not {} floating samples of {} elements each, as the "
                                   "model's input_spec() declared; check the data source against the model",
                                   model_, x.describe(), b, sample_numel_));
  }
  const Tensor out = input_.rows(0, b).reshape(x.shape());
  backend_->cast(out, x);
  return out;
}

Tensor ComputeBoundary::logits(const Tensor& logits) {
  if (logits.dtype() != compute_) {
    throw BackendError(fmt::format("model '{}' returned logits {}, but a model returns them in the compute "
                                   "dtype {} (kiln/model.hpp); the trainer casts them to f32 for the loss",
                                   model_, logits.describe(), dtype_name(compute_)));
  }
  if (compute_ == DType::f32) return logits;
  const std::int64_t b = batch_rows(logits, "logits");
  if (logits.rank() != 2 || logits.dim(1) != classes_) {
    throw BackendError(fmt::format("model '{}' returned logits {}, expected ({}, {})", model_, logits.describe(),
                                   b, classes_));
  }
  const Tensor out = logits_f32_.rows(0, b);
  backend_->cast(out, logits);
  return out;
}

Tensor ComputeBoundary::dlogits(const Tensor& dlogits) {
  if (compute_ == DType::f32) return dlogits;
  const std::int64_t b = batch_rows(dlogits, "dlogits");
  const Tensor out = dlogits_.rows(0, b);
  backend_->cast(out, dlogits);
  return out;
}

}  // namespace kiln::train
