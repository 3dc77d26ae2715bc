// Registry-backed plugins, the forwarding backend and tensor helpers of test_precision.
#include "precision_fixture.hpp"

#include <cmath>
#include <cstdlib>

#include "kiln/config/config.hpp"
#include "kiln/plugin/registry.hpp"

namespace kiln::test {
namespace {

// Never destroyed: objects made by plugin code must not outlive that code.
plugin::Registry& registry() {
  static plugin::Registry* reg = [] {
    // oneDNN's OpenMP threads must not spin on the shared cores of a parallel ctest run.
    ::setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/0);
    auto* r = new plugin::Registry({KILN_TEST_PLUGIN_DIR});
    r->scan();
    return r;
  }();
  return *reg;
}

ParamMap plugin_params(std::uint32_t kind, const std::string& name, const std::string& table,
                       const std::string& toml_body) {
  const plugin::PluginInfo& info = registry().require(kind, name, table);
  auto cfg = config::Config::parse("[" + table + "]\n" + toml_body + "\n", "test.toml", {});
  return cfg.validate(table, info.params);
}

}  // namespace

Backend& cpu() {
  static std::shared_ptr<Backend>* backend = [] {
    static const ParamMap params = plugin_params(KILN_KIND_BACKEND, "cpu", "backend", "");
    PluginArgs args;
    args.params = &params;
    const auto& info = registry().require(KILN_KIND_BACKEND, "cpu", "backend");
    return new std::shared_ptr<Backend>(registry().create_backend(info, args));
  }();
  return **backend;
}

std::shared_ptr<PrecisionPolicy> make_policy(const std::string& name, const std::string& toml_body) {
  const ParamMap params = plugin_params(KILN_KIND_PRECISION, name, "precision", toml_body);
  PluginArgs args;
  args.params = &params;
  const auto& info = registry().require(KILN_KIND_PRECISION, name, "precision");
  return registry().create_precision(info, args);
}

bool ForwardingBackend::supports(Op op, DType dtype) const {
  for (const auto& [o, d] : extra_supported) {
    if (o == op && d == dtype) return true;
  }
  return inner_.supports(op, dtype);
}

std::unique_ptr<nn::ParameterStore> make_store(DType compute_dtype) {
  auto store = std::make_unique<nn::ParameterStore>();
  store->declare("a", {3, 5}, nn::Init::uniform(-1, 1));
  store->declare("b", {7}, nn::Init::zeros(), kParamNoWeightDecay);
  store->declare("c", {2, 2}, nn::Init::ones());
  store->allocate(cpu(), DType::f32, compute_dtype, 7);
  return store;
}

std::vector<double> read(const Tensor& t) {
  Tensor f32 = t;
  if (t.dtype() != DType::f32) {
    f32 = cpu().allocate(t.shape(), DType::f32, MemoryKind::device);
    cpu().cast(f32, t);  // f16/bf16 -> f32 is exact
  }
  Tensor host = host_tensor(t.shape(), DType::f32);
  cpu().copy(f32, host);
  const float* p = host.data_as<float>();
  return std::vector<double>(p, p + host.numel());
}

void write(const Tensor& t, const std::vector<double>& v) {
  Tensor host = host_tensor(t.shape(), DType::f32);
  float* p = host.data_as<float>();
  for (std::int64_t i = 0; i < host.numel(); ++i) p[i] = static_cast<float>(v.at(static_cast<std::size_t>(i)));
  cpu().copy(host, t);
  cpu().synchronize();
}

double round_to_bits(double x, int bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::ilogb(x);  // x = m * 2^e with 1 <= |m| < 2
  return std::ldexp(std::nearbyint(std::ldexp(x, bits - 1 - e)), e - (bits - 1));
}

}  // namespace kiln::test
