// Precision plugins from the shared test registry (tests/nn/nn_fixture), the forwarding backend
// and the arena/rounding helpers of test_precision.
#include "precision_fixture.hpp"

#include <cmath>

namespace kiln::test {

std::shared_ptr<PrecisionPolicy> make_policy(const std::string& name, const std::string& toml_body) {
  const ParamMap params = plugin_params(KILN_KIND_PRECISION, name, toml_body);
  PluginArgs args;
  args.params = &params;
  const auto& info = registry().require(KILN_KIND_PRECISION, name, "precision");
  return registry().create_precision(info, args);
}

bool PolicyWatchBackend::supports(Op op, DType dtype) const {
  for (const auto& [o, d] : unsupported) {
    if (o == op && d == dtype) return false;
  }
  for (const auto& [o, d] : extra_supported) {
    if (o == op && d == dtype) return true;
  }
  return ForwardingBackend::supports(op, dtype);
}

std::unique_ptr<nn::ParameterStore> make_store(DType compute_dtype) {
  auto store = std::make_unique<nn::ParameterStore>();
  store->declare("a", {3, 5}, nn::Init::uniform(-1, 1));
  store->declare("b", {7}, nn::Init::zeros(), kParamNoWeightDecay);
  store->declare("c", {2, 2}, nn::Init::ones());
  store->allocate(cpu(), DType::f32, compute_dtype, 7);
  return store;
}

double round_to_bits(double x, int bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::ilogb(x);  // x = m * 2^e with 1 <= |m| < 2
  return std::ldexp(std::nearbyint(std::ldexp(x, bits - 1 - e)), e - (bits - 1));
}

}  // namespace kiln::test
