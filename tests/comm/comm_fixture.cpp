// Plugin loading, rank threads and conversions for test_comm (see comm_fixture.hpp).
#include "comm_fixture.hpp"

#include <cstring>
#include <exception>
#include <thread>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin_args.hpp"

namespace kiln::test {
namespace {

ParamMap validated(const std::string& table, const plugin::PluginInfo& info, const std::string& body) {
  auto cfg = config::Config::parse("[" + table + "]\ntype = \"" + info.name + "\"\n" + body + "\n",
                                   "test.toml", {});
  (void)cfg.plugin_type(table);
  return cfg.validate(table, info.params);
}

}  // namespace

const plugin::Registry& registry() {
  static const plugin::Registry reg = [] {
    plugin::Registry r({KILN_TEST_PLUGIN_DIR});
    r.scan();
    return r;
  }();
  return reg;
}

Backend& cpu() {
  static const std::shared_ptr<Backend> backend = [] {
    const auto& info = registry().require(KILN_KIND_BACKEND, "cpu", "backend");
    static const ParamMap params = validated("backend", info, "threads = 1");
    PluginArgs args;
    args.params = &params;
    return registry().create_backend(info, args);
  }();
  return *backend;
}

std::shared_ptr<Communicator> make_communicator(const std::string& name, const std::string& toml_body,
                                                const RankInfo& ranks) {
  const auto& info = registry().require(KILN_KIND_COMMUNICATOR, name, "comm");
  const ParamMap params = validated("comm", info, toml_body);
  PluginArgs args;
  args.params = &params;
  args.ranks = ranks;
  return registry().create_communicator(info, args);
}

std::vector<std::string> run_ranks(int world, const std::function<void(int rank)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = std::string(e.what()).empty() ? "<empty message>" : e.what();
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = "<non-std exception>";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

Tensor make_tensor(const std::vector<double>& values, DType dtype) {
  const Shape shape{static_cast<std::int64_t>(values.size())};
  Tensor out = cpu().allocate(shape, dtype, MemoryKind::host);
  switch (dtype) {
    case DType::f64: {
      auto* p = out.data_as<double>();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
      break;
    }
    case DType::f32:
    case DType::f16:
    case DType::bf16: {
      Tensor f = cpu().allocate(shape, DType::f32, MemoryKind::host);
      auto* p = f.data_as<float>();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
      if (dtype == DType::f32) return f;
      if (!values.empty()) cpu().cast(out, f);
      break;
    }
    case DType::i32: {
      auto* p = out.data_as<std::int32_t>();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<std::int32_t>(values[i]);
      break;
    }
    case DType::i64: {
      auto* p = out.data_as<std::int64_t>();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<std::int64_t>(values[i]);
      break;
    }
    case DType::u8: {
      auto* p = out.data_as<std::uint8_t>();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<std::uint8_t>(values[i]);
      break;
    }
  }
  return out;
}

std::vector<double> read_values(const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<double> out(n);
  switch (t.dtype()) {
    case DType::f64: {
      const auto* p = t.data_as<double>();
      for (std::size_t i = 0; i < n; ++i) out[i] = p[i];
      break;
    }
    case DType::f32:
    case DType::f16:
    case DType::bf16: {
      Tensor f = t;
      if (t.dtype() != DType::f32) {
        f = cpu().allocate(t.shape(), DType::f32, MemoryKind::host);
        if (n > 0) cpu().cast(f, t);
      }
      const auto* p = f.data_as<float>();
      for (std::size_t i = 0; i < n; ++i) out[i] = p[i];
      break;
    }
    case DType::i32: {
      const auto* p = t.data_as<std::int32_t>();
      for (std::size_t i = 0; i < n; ++i) out[i] = p[i];
      break;
    }
    case DType::i64: {
      const auto* p = t.data_as<std::int64_t>();
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<double>(p[i]);
      break;
    }
    case DType::u8: {
      const auto* p = t.data_as<std::uint8_t>();
      for (std::size_t i = 0; i < n; ++i) out[i] = p[i];
      break;
    }
  }
  return out;
}

double round_to(double x, DType dtype) {
  if (dtype == DType::f64 || dtype == DType::i32 || dtype == DType::i64 || dtype == DType::u8) return x;
  return read_values(make_tensor({x}, dtype))[0];
}

RankInfo rank_of(int r, int world) {
  RankInfo ranks;
  ranks.rank = r;
  ranks.world_size = world;
  ranks.local_rank = r;
  ranks.local_world_size = world;
  ranks.source = "test";
  return ranks;
}

}  // namespace kiln::test
