// Helpers of the resnet tests: the `resnet` model and `synthetic` source made from inline TOML
// validated against their registered plugin schemas (the classes themselves are compiled into
// the test, so tests can see the declared ParameterStore), a precondition that skips tests
// needing the CNN backend ops where the cpu backend lacks them, and a backend without conv.
#pragma once

#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>

#include "kiln/backend.hpp"
#include "../support/forwarding_backend.hpp"
#include "resnet_model.hpp"
#include "synthetic_source.hpp"

namespace kiln::test {

/// A ResnetModel from the [model] keys in `toml_body` (schema defaults for the rest).
std::unique_ptr<resnet::ResnetModel> make_resnet(const std::string& toml_body);
/// A SyntheticSource from the [data] keys in `toml_body`.
std::unique_ptr<synthetic::SyntheticSource> make_synthetic(const std::string& toml_body);
/// Builds `model` on the cpu backend in f32 for `max_batch` rows (seed 7).
void build(Model& model, std::int64_t max_batch);

/// Whether the cpu backend implements every conv/batch-norm/pool op in f32; a Boost.Test
/// precondition, so tests that need them are reported skipped (with the missing op) otherwise.
boost::test_tools::assertion_result cnn_ops_available(boost::unit_test::test_unit_id);

/// The cpu backend minus every convolution op (supports() says no), for build-time refusal.
class NoConvBackend final : public ForwardingBackend {
 public:
  NoConvBackend();
  std::string_view name() const override { return "no-conv"; }
  bool supports(Op op, DType dtype) const override;
};

}  // namespace kiln::test
