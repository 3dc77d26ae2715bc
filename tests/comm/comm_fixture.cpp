// Plugin loading, rank threads and conversions for test_comm (see comm_fixture.hpp).
#include "comm_fixture.hpp"

#include "cli/comm_suite.hpp"
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
  return cli::run_ranks(world, body);
}

Tensor make_tensor(const std::vector<double>& values, DType dtype) { return cli::make_host_tensor(cpu(), values, dtype); }

std::vector<double> read_values(const Tensor& t) { return cli::read_host_values(cpu(), t); }

double round_to(double x, DType dtype) {
  if (dtype == DType::f64 || dtype == DType::i32 || dtype == DType::i64 || dtype == DType::u8) return x;
  return read_values(make_tensor({x}, dtype))[0];
}

RankInfo rank_of(int r, int world) { return cli::rank_of(r, world, "test"); }

}  // namespace kiln::test
