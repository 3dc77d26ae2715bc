// Parameter runs: the flat slices precision policies cast, check and scale with one Backend op
// each instead of one op per tensor.
//
// A run is a maximal sequence of consecutive parameters whose tensors lie in one storage, in
// increasing order, at the same element distances in every arena involved; it is returned as one
// 1-D view from the first parameter's first element to the last one's end. The gaps between
// parameters inside a run are covered too: as for the optimizer's segments, a ParameterStore
// arena's gaps are zero and belong to no one, so casting, checking or scaling them is harmless.
#pragma once

#include <span>
#include <vector>

#include "kiln/model.hpp"

namespace kiln::sdk {

/// A master-values slice and the compute-copy slice that mirrors it.
struct CastRun {
  Tensor value;
  Tensor compute;
};

/// Runs of master values and their compute copies. Parameters whose compute copy is the master
/// itself (same storage and offset, e.g. f32 compute) are left out: there is nothing to cast.
std::vector<CastRun> cast_runs(std::span<const Parameter> params);

/// Runs of gradients (1-D views), for one check_finite/scale per arena.
std::vector<Tensor> grad_runs(std::span<const Parameter> params);

/// Both kinds of run of one parameter list, kept between steps: the list a model returns is
/// fixed after Model::build, so refresh() recomputes only when it is handed another list (another
/// address or size), and a policy calls it first thing in each hook.
class ParamRuns {
 public:
  void refresh(std::span<const Parameter> params);
  const std::vector<CastRun>& casts() const { return casts_; }
  const std::vector<Tensor>& grads() const { return grads_; }

 private:
  std::vector<CastRun> casts_;
  std::vector<Tensor> grads_;
  const Parameter* for_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kiln::sdk
