// Plugin loading and comparison helpers for test_cpu_ops (see cpu_fixture.hpp).
#include "cpu_fixture.hpp"

#include <boost/dll/shared_library.hpp>
#include <boost/test/unit_test.hpp>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "kiln/plugin_abi.h"
#include "kiln/version.hpp"

namespace kiln::test {
namespace {

struct LoadedLibrary {
  boost::dll::shared_library library;
  const kiln_plugin_v1* plugin = nullptr;
};

// Never unloaded: objects the plugin made must not outlive its code.
LoadedLibrary& loaded() {
  static LoadedLibrary* lib = [] {
    auto* l = new LoadedLibrary;
    const std::string path = std::string(KILN_TEST_PLUGIN_DIR) + "/libkiln-backend-cpu.so";
    l->library.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    const void* raw = l->library.get<const void*>(KILN_LIBRARY_SYMBOL);
    const auto* desc = static_cast<const kiln_library_v1*>(raw);
    BOOST_TEST_REQUIRE(desc->abi_major == KILN_ABI_MAJOR);
    BOOST_TEST_REQUIRE(std::string(desc->toolchain_key) == KILN_TOOLCHAIN_KEY);
    BOOST_TEST_REQUIRE(desc->num_plugins == 1u);
    l->plugin = &desc->plugins[0];
    BOOST_TEST_REQUIRE(l->plugin->kind == static_cast<std::uint32_t>(KILN_KIND_BACKEND));
    BOOST_TEST_REQUIRE(std::string(l->plugin->name) == "cpu");
    return l;
  }();
  return *lib;
}

}  // namespace

void BackendDeleter::operator()(Backend* b) const {
  loaded().plugin->destroy(KILN_KIND_BACKEND, static_cast<void*>(b));
}

BackendPtr make_cpu_backend(const ParamMap& params, const RankInfo& ranks) {
  PluginArgs args;
  args.params = &params;
  args.ranks = ranks;
  void* object = loaded().plugin->create(&args);
  return BackendPtr(static_cast<Backend*>(object));
}

BackendPtr make_cpu_backend_with(const std::string& key, const std::string& value) {
  return make_cpu_backend_with({{key, value}});
}

BackendPtr make_cpu_backend_with(std::initializer_list<std::pair<std::string, std::string>> options) {
  ParamMap params("backend");
  params.set("threads", std::int64_t{0}, "test");
  for (const auto& [key, value] : options) params.set(key, value, "test");
  return make_cpu_backend(params);
}

ConvPathCounts conv_path_counts(const Backend& backend) {
  using Each = void (*)(const char*, const char*, std::uint64_t, void*);
  const auto paths = loaded().library.get<int(const Backend*, Each, void*)>("kiln_cpu_conv_paths");
  ConvPathCounts counts;
  const Each each = [](const char* direction, const char* path, std::uint64_t calls, void* context) {
    (*static_cast<ConvPathCounts*>(context))[std::string(direction) + "/" + path] = calls;
  };
  BOOST_TEST_REQUIRE(paths(&backend, each, &counts) == 1, "kiln_cpu_conv_paths: not a cpu backend");
  return counts;
}

ConvPathCounts conv_paths_since(const ConvPathCounts& before, const ConvPathCounts& after) {
  ConvPathCounts grown;
  for (const auto& [name, calls] : after) {
    const auto was = before.find(name);
    const std::uint64_t previous = was == before.end() ? 0 : was->second;
    if (calls > previous) grown[name] = calls - previous;
  }
  return grown;
}

std::string path_of(const ConvPathCounts& paths, const std::string& direction) {
  const std::string prefix = direction + "/";
  std::string ran;
  for (const auto& [name, calls] : paths) {
    if (calls == 0 || name.compare(0, prefix.size(), prefix) != 0) continue;
    ran += (ran.empty() ? "" : "+") + name.substr(prefix.size());
  }
  return ran;
}

Backend& cpu() {
  static Backend* backend = [] {
    ParamMap params("backend");
    params.set("threads", std::int64_t{0}, "default");
    return make_cpu_backend(params).release();  // lives until exit, like the library
  }();
  return *backend;
}

Tensor random_f32(const Shape& shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = host_tensor(shape, DType::f32);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data_as<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Tensor poisoned(const Shape& shape, DType dtype) {
  Tensor t = host_tensor(shape, dtype);
  if (dtype == DType::f32) {
    float* p = t.data_as<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  } else if (dtype == DType::bf16 || dtype == DType::f16) {
    auto* p = static_cast<std::uint16_t*>(t.data());
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = 0x7fff;  // NaN in both formats
  } else {
    std::memset(t.data(), 0xA5, t.bytes());
  }
  return t;
}

Tensor f32_tensor(const Shape& shape, const std::vector<float>& v) {
  Tensor t = host_tensor(shape, DType::f32);
  BOOST_TEST_REQUIRE(static_cast<std::size_t>(t.numel()) == v.size());
  std::memcpy(t.data(), v.data(), t.bytes());
  return t;
}

std::vector<double> values(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<double>(p, p + t.numel());
}

Tensor to_channels_last(const Tensor& t) {
  Tensor out = host_tensor(t.shape(), t.dtype()).with_layout(Layout::nhwc);
  const std::int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3);
  const float* in = t.data_as<float>();
  float* o = out.data_as<float>();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t j = 0; j < hw; ++j) o[(b * hw + j) * c + k] = in[(b * c + k) * hw + j];
  return out;
}

std::vector<double> logical_values(const Tensor& t) {
  std::vector<double> v = values(t);
  if (t.layout() != Layout::nhwc) return v;
  const std::int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3);
  std::vector<double> out(v.size());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t j = 0; j < hw; ++j) out[static_cast<std::size_t>((b * c + k) * hw + j)] = v[static_cast<std::size_t>((b * hw + j) * c + k)];
  return out;
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  if (dtype == DType::f32) return t;
  Tensor out = host_tensor(t.shape(), dtype).with_layout(t.layout());
  cpu().cast(out, t);
  return out;
}

Tensor to_f32(const Tensor& t) {
  Tensor out = host_tensor(t.shape(), DType::f32).with_layout(t.layout());
  if (t.dtype() == DType::f32) {
    std::memcpy(out.data(), t.data(), t.bytes());
  } else {
    cpu().cast(out, t);
  }
  return out;
}

double relative_difference(const Tensor& a, const Tensor& b) {
  const Tensor fa = a.dtype() == DType::f32 ? a : to_f32(a), fb = b.dtype() == DType::f32 ? b : to_f32(b);
  const std::vector<double> va = logical_values(fa), vb = logical_values(fb);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) || std::isnan(vb[i])) return INFINITY;
    worst = std::max(worst, std::fabs(va[i] - vb[i]));
    scale = std::max(scale, std::fabs(vb[i]));
  }
  return scale > 0 ? worst / scale : worst;
}

std::size_t heap_in_use() { return mallinfo2().uordblks; }

void check_heap_steady(const std::function<void()>& step) {
  constexpr int kWarmUp = 20, kMeasured = 20;
  for (int i = 0; i < kWarmUp; ++i) step();
  const std::size_t before = heap_in_use();
  for (int i = 0; i < kMeasured; ++i) step();
  const std::size_t after = heap_in_use();
  BOOST_TEST(after == before, "the heap grew by " << static_cast<long long>(after) - static_cast<long long>(before)
                                                  << " bytes over " << kMeasured << " calls after " << kWarmUp
                                                  << " to warm up");
}

Tensor rounded(const Tensor& t, DType dtype) { return to_f32(to_dtype(t, dtype)); }

void check_close(const Tensor& got_any, const std::vector<double>& want, double rtol, double atol,
                 const std::string& what, const std::vector<double>* scale) {
  BOOST_TEST_REQUIRE(static_cast<std::size_t>(got_any.numel()) == want.size());
  const Tensor got = got_any.dtype() == DType::f32 ? got_any : to_f32(got_any);
  const float* g = got.data_as<float>();
  int bad = 0;
  std::ostringstream report;
  double worst = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double s = scale ? (*scale)[i] : std::abs(want[i]);
    const double err = std::abs(static_cast<double>(g[i]) - want[i]);
    const double bound = atol + rtol * s;
    if (!(err <= bound)) {
      if (bad < 5) report << " [" << i << "] got " << g[i] << " want " << want[i] << ";";
      ++bad;
    }
    if (bound > 0) worst = std::max(worst, err / bound);
  }
  BOOST_TEST(bad == 0, what << ": " << bad << " of " << want.size()
                            << " elements outside atol " << atol << " + rtol " << rtol << ":"
                            << report.str());
  BOOST_TEST_MESSAGE(what << ": worst error " << worst << " of the bound");
}

}  // namespace kiln::test
