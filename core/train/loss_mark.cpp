// The loss check carried by the gradients' all-reduce (loss_mark.hpp).
#include "kiln/train/loss_mark.hpp"

#include <cmath>

namespace kiln::train {

std::unique_ptr<LossMark> LossMark::make(Backend& backend, const Tensor& carrier) {
  if (!carrier.defined() || carrier.dtype() != DType::f32 || carrier.numel() != 1) return nullptr;
  if (!backend.supports(Op::scale, DType::f32) || !backend.supports(Op::add, DType::f32)) return nullptr;
  return std::unique_ptr<LossMark>(new LossMark(backend, carrier));
}

LossMark::LossMark(Backend& backend, const Tensor& carrier)
    : backend_(backend),
      carrier_(carrier),
      zero_or_nan_(backend.allocate({1}, DType::f32, MemoryKind::device)),
      host_(host_tensor({1}, DType::f32)) {}

void LossMark::add(const Tensor& loss_sum) {
  backend_.copy(loss_sum, zero_or_nan_);
  backend_.scale(zero_or_nan_, 0.0f);
  backend_.add(carrier_, carrier_, zero_or_nan_);
}

bool LossMark::nan_after_sum() {
  backend_.copy(carrier_, host_);  // a copy into host memory is complete when it returns
  return std::isnan(host_.data_as<float>()[0]);
}

}  // namespace kiln::train
