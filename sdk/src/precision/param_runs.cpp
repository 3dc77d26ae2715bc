// Grouping parameters into flat runs (param_runs.hpp). Element offsets, not byte offsets, are
// compared, so an f32 master arena and a 2-byte compute arena with the same element layout
// (ParameterStore's) group identically.
#include "kiln/sdk/param_runs.hpp"

#include <cstdint>

namespace kiln::sdk {
namespace {

std::int64_t element_offset(const Tensor& t) {
  return static_cast<std::int64_t>(t.offset_bytes() / dtype_size(t.dtype()));
}

std::int64_t element_end(const Tensor& t) { return element_offset(t) + t.numel(); }

/// Whether `next` continues the run that began with `first` and last took in `prev`: same
/// storage and dtype, row-major, after `prev`, and `distance` elements after `first` (any
/// distance when `distance` < 0). Backend-private layouts never join a run.
bool continues(const Tensor& first, const Tensor& prev, const Tensor& next, std::int64_t distance) {
  if (first.layout() != Layout::row_major || next.layout() != Layout::row_major) return false;
  if (next.storage() != first.storage() || next.dtype() != first.dtype()) return false;
  if (element_offset(next) < element_end(prev)) return false;
  return distance < 0 || element_offset(next) - element_offset(first) == distance;
}

/// One 1-D view from first to the end of last; a lone tensor in a private layout stays itself.
Tensor flat(const Tensor& first, const Tensor& last) {
  if (first.layout() != Layout::row_major) return first;
  return Tensor(first.storage(), Shape{element_end(last) - element_offset(first)}, first.dtype(),
                first.offset_bytes());
}

bool aliases(const Parameter& p) {
  return p.compute.storage() == p.value.storage() && p.compute.offset_bytes() == p.value.offset_bytes() &&
         p.compute.dtype() == p.value.dtype();
}

}  // namespace

std::vector<CastRun> cast_runs(std::span<const Parameter> params) {
  std::vector<CastRun> runs;
  std::size_t i = 0;
  while (i < params.size()) {
    const Parameter& first = params[i];
    if (aliases(first)) {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < params.size() && !aliases(params[j])) {
      const Parameter& prev = params[j - 1];
      const Parameter& next = params[j];
      if (!continues(first.value, prev.value, next.value, -1)) break;
      const std::int64_t distance = element_offset(next.value) - element_offset(first.value);
      if (!continues(first.compute, prev.compute, next.compute, distance)) break;
      ++j;
    }
    runs.push_back(CastRun{flat(first.value, params[j - 1].value), flat(first.compute, params[j - 1].compute)});
    i = j;
  }
  return runs;
}

std::vector<Tensor> grad_runs(std::span<const Parameter> params) {
  std::vector<Tensor> runs;
  std::size_t i = 0;
  while (i < params.size()) {
    std::size_t j = i + 1;
    while (j < params.size() && continues(params[i].grad, params[j - 1].grad, params[j].grad, -1)) ++j;
    runs.push_back(flat(params[i].grad, params[j - 1].grad));
    i = j;
  }
  return runs;
}

void ParamRuns::refresh(std::span<const Parameter> params) {
  if (params.data() == for_ && params.size() == size_) return;
  casts_ = cast_runs(params);
  grads_ = grad_runs(params);
  for_ = params.data();
  size_ = params.size();
}

}  // namespace kiln::sdk
