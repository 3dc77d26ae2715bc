// Registry-backed plugin objects and tensor copies for the nn/train/golden tests (see header).
#include "nn_fixture.hpp"

#include <cstdlib>

#include "kiln/config/config.hpp"
#include "kiln/plugin/registry.hpp"

namespace kiln::test {

// Never destroyed: objects made by plugin code must not outlive that code.
const plugin::Registry& registry() {
  static plugin::Registry* reg = [] {
    // As in `kiln`'s main: oneDNN's OpenMP threads must not spin on the 2 shared cores of a
    // parallel ctest run. libgomp reads this when the cpu plugin loads it, during scan().
    ::setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/0);
    auto* r = new plugin::Registry({KILN_TEST_PLUGIN_DIR});
    r->scan();
    return r;
  }();
  return *reg;
}

namespace {

const char* table_of(std::uint32_t kind) {
  switch (kind) {
    case KILN_KIND_BACKEND: return "backend";
    case KILN_KIND_MODEL: return "model";
    case KILN_KIND_DATA: return "data";
    case KILN_KIND_COMMUNICATOR: return "comm";
    default: return "precision";
  }
}

}  // namespace

ParamMap plugin_params(std::uint32_t kind, const std::string& name, const std::string& toml_body) {
  const plugin::PluginInfo& info = registry().require(kind, name, table_of(kind));
  const std::string table = table_of(kind);
  auto cfg = config::Config::parse("[" + table + "]\n" + toml_body + "\n", "test.toml", {});
  return cfg.validate(table, info.params);
}

Backend& cpu() {
  static std::shared_ptr<Backend>* backend = [] {
    static const ParamMap params = plugin_params(KILN_KIND_BACKEND, "cpu", "");
    PluginArgs args;
    args.params = &params;
    const auto& info = registry().require(KILN_KIND_BACKEND, "cpu", "backend");
    return new std::shared_ptr<Backend>(registry().create_backend(info, args));
  }();
  return **backend;
}

std::shared_ptr<Model> make_mlp(const std::string& toml_body) {
  const ParamMap params = plugin_params(KILN_KIND_MODEL, "mlp", toml_body);
  PluginArgs args;
  args.params = &params;
  const auto& info = registry().require(KILN_KIND_MODEL, "mlp", "model");
  return registry().create_model(info, args);
}

std::vector<double> read(const Tensor& t) {
  Tensor f32 = t;
  if (t.dtype() != DType::f32) {
    f32 = cpu().allocate(t.shape(), DType::f32, MemoryKind::device).with_layout(t.layout());
    cpu().cast(f32, t);  // f16/bf16 -> f32 is exact
  }
  Tensor host = host_tensor(t.shape(), DType::f32);
  cpu().copy(f32, host);
  const float* p = host.data_as<float>();
  std::vector<double> out(p, p + host.numel());
  if (t.layout() == kiln::Layout::nhwc) {  // back to logical NCHW order
    const std::int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3);
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t k = 0; k < c; ++k)
        for (std::int64_t j = 0; j < hw; ++j) out[static_cast<std::size_t>((b * c + k) * hw + j)] = p[(b * hw + j) * c + k];
  }
  return out;
}
void write(const Tensor& t, const std::vector<double>& v) {
  Tensor host = host_tensor(t.shape(), DType::f32);
  float* p = host.data_as<float>();
  for (std::int64_t i = 0; i < host.numel(); ++i) p[i] = static_cast<float>(v.at(static_cast<std::size_t>(i)));
  if (t.layout() == kiln::Layout::nhwc) {  // v is in logical NCHW order
    const std::int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3);
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t k = 0; k < c; ++k)
        for (std::int64_t j = 0; j < hw; ++j) p[(b * hw + j) * c + k] = static_cast<float>(v.at(static_cast<std::size_t>((b * c + k) * hw + j)));
  }
  cpu().copy(host, t);
  cpu().synchronize();
}

Tensor device_f32(const Shape& shape, const std::vector<double>& v, kiln::Layout layout) {
  Tensor t = cpu().allocate(shape, DType::f32, MemoryKind::device).with_layout(layout);
  write(t, v);
  return t;
}

std::vector<double> uniform(std::size_t n, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(n);
  for (auto& x : out) x = static_cast<float>(dist(rng));  // representable in f32
  return out;
}

}  // namespace kiln::test
