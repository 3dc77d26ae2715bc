// BatchNormReserve (batchnorm_reserve.hpp).
#include "dnn/batchnorm_reserve.hpp"

namespace kiln::cuda {

void BatchNormReserve::set_required(std::size_t bytes) noexcept {
  if (bytes != required_) written_for_ = nullptr;
  required_ = bytes;
}

std::optional<std::string> BatchNormReserve::backward_problem(const void* x, std::size_t bytes_needed) const {
  if (bytes_needed == 0) return std::nullopt;
  if (bytes_needed != required_) {
    return std::string(
        "the backward needs a cuDNN reserve space of another size than the training forward wrote (the "
        "plan changed batch-norm mode between them); run the training forward again before the backward");
  }
  if (written_for_ == nullptr) {
    return std::string(
        "no training forward has filled this plan's cuDNN reserve space (run batchnorm_train_forward "
        "with this plan before batchnorm_backward)");
  }
  if (written_for_ != x) {
    return std::string(
        "the plan's cuDNN reserve space was written by a training forward on another x; run the "
        "backward of a batch-norm layer right after that layer's own forward, with the same x (one plan "
        "per layer)");
  }
  return std::nullopt;
}

}  // namespace kiln::cuda
