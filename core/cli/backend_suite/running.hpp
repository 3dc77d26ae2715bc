// The state of the variant that is running, shared by the runner (suite.cpp, which sets it) and
// the harness (harness.cpp, whose backend() and judgements use it). Internal to the suite.
#pragma once

#include <vector>

#include "suite.hpp"

namespace kiln::conformance::detail {

struct Running {
  Backend* backend = nullptr;
  VariantResult* result = nullptr;
  const CheckObserver* observe = nullptr;
  /// Host copies handed to Backend::to_device, alive until the next fetch() synchronizes.
  std::vector<Tensor> staged;
};

/// The one running variant of this process (run_variant is not reentrant).
Running& running();

}  // namespace kiln::conformance::detail
