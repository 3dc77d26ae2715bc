// Backend creation and transfers for test_cuda_dnn_gpu (see gpu_fixture.hpp). Half-precision
// values are encoded on the host (_Float16 for f16, bit rounding for bf16), so the test does not
// depend on the backend's own cast to get its inputs in.
#include "gpu_fixture.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/plugin_args.hpp"

namespace kiln::cuda_test {
namespace {

std::uint16_t bf16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (inputs are finite)
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_value(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double round_one(double v, DType dtype) {
  switch (dtype) {
    case DType::f16: return static_cast<double>(static_cast<float>(static_cast<_Float16>(static_cast<float>(v))));
    case DType::bf16: return static_cast<double>(bf16_value(bf16_bits(static_cast<float>(v))));
    default: return static_cast<double>(static_cast<float>(v));
  }
}

/// Memory index of logical element i of a `shape` tensor stored in `layout`.
std::int64_t memory_index(std::int64_t i, const Shape& shape, Layout layout) {
  if (layout != Layout::nhwc) return i;
  const std::int64_t C = shape[1], H = shape[2], W = shape[3];
  const std::int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
  return ((n * H + h) * W + w) * C + c;
}

}  // namespace

std::shared_ptr<Backend> make_gpu_backend(const std::string& extra_toml) {
  // Never destroyed: plugin libraries stay loaded while any backend made from them may live.
  static plugin::Registry& registry = *[] {
    auto* r = new plugin::Registry({KILN_TEST_PLUGIN_DIR});
    r->scan();
    return r;
  }();
  const plugin::PluginInfo& info = registry.require(KILN_KIND_BACKEND, "cuda", "backend");
  auto config = config::Config::parse("[backend]\ntype = \"cuda\"\n" + extra_toml + "\n", "test_cuda_dnn_gpu", {});
  BOOST_TEST_REQUIRE(config.plugin_type("backend") == "cuda");
  // The backend keeps no reference to its ParamMap after construction; keep each alive anyway.
  static std::vector<std::unique_ptr<ParamMap>> params;
  params.push_back(std::make_unique<ParamMap>(config.validate("backend", std::span(info.params))));
  PluginArgs args;
  args.params = params.back().get();
  return registry.create_backend(info, args);
}

Backend& gpu() {
  static std::shared_ptr<Backend> backend = make_gpu_backend("");
  return *backend;
}

Values rounded(const Values& v, DType dtype) {
  Values out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = round_one(v[i], dtype);
  return out;
}

Values random_values(std::size_t count, std::mt19937& rng, DType dtype, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Values v(count);
  for (double& x : v) x = round_one(dist(rng), dtype);
  return v;
}

Tensor upload(const Values& v, const Shape& shape, DType dtype, Layout layout) {
  Tensor host = host_tensor(shape, dtype);
  BOOST_TEST_REQUIRE(static_cast<std::size_t>(host.numel()) == v.size());
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const std::int64_t m = memory_index(i, shape, layout);
    const float f = static_cast<float>(v[static_cast<std::size_t>(i)]);
    switch (dtype) {
      case DType::f32: host.data_as<float>()[m] = f; break;
      case DType::bf16: static_cast<std::uint16_t*>(host.data())[m] = bf16_bits(f); break;
      case DType::f16: {
        const _Float16 h = static_cast<_Float16>(f);
        std::memcpy(static_cast<std::uint16_t*>(host.data()) + m, &h, 2);
        break;
      }
      default: BOOST_FAIL("upload: unsupported dtype");
    }
  }
  Tensor dev = gpu().allocate(shape, dtype, MemoryKind::device);
  if (layout != Layout::row_major) {
    host = host.with_layout(layout);
    dev = dev.with_layout(layout);
  }
  gpu().copy(host, dev);
  gpu().synchronize();
  return dev;
}

Tensor poisoned(const Shape& shape, DType dtype, Layout layout) {
  Tensor dev = gpu().allocate(shape, dtype, MemoryKind::device);
  gpu().fill(dev, std::numeric_limits<double>::quiet_NaN());
  return layout == Layout::row_major ? dev : dev.with_layout(layout);
}

Values download(const Tensor& t) {
  Tensor host = host_tensor(t.shape(), t.dtype());
  if (t.layout() != Layout::row_major) host = host.with_layout(t.layout());
  gpu().synchronize();
  gpu().copy(t, host);
  Values v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const std::int64_t m = memory_index(i, t.shape(), t.layout());
    switch (t.dtype()) {
      case DType::f32: v[static_cast<std::size_t>(i)] = host.data_as<float>()[m]; break;
      case DType::bf16: v[static_cast<std::size_t>(i)] = bf16_value(static_cast<const std::uint16_t*>(host.data())[m]); break;
      case DType::f16: {
        _Float16 h;
        std::memcpy(&h, static_cast<const std::uint16_t*>(host.data()) + m, 2);
        v[static_cast<std::size_t>(i)] = static_cast<float>(h);
        break;
      }
      default: BOOST_FAIL("download: unsupported dtype");
    }
  }
  return v;
}

double relative_error(const Values& got, const Values& want) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return std::numeric_limits<double>::infinity();
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-2; }

std::string layout_name(Layout l) { return l == Layout::nhwc ? "nhwc" : "nchw"; }

}  // namespace kiln::cuda_test
