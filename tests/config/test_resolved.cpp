// resolved_toml(): tables in validation order, plugin types kept, defaults written out, and a
// round trip (parse the text again, validate with the same schemas) that gives the same values.
#include <boost/test/unit_test.hpp>

#include "fixtures.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"

using kiln::config::Config;
using kiln::config::test::kDataSchema;
using kiln::config::test::kLoaderSchema;
using kiln::config::test::kModelSchema;
using kiln::config::test::kOptimizerSchema;

namespace {
const char* const kRun =
    "[model]\n"
    "type = \"mlp\"\n"
    "hidden = [256, 128]\n"
    "dropout = 1\n"
    "\n"
    "[data.train]\n"
    "type = \"mnist\"\n"
    "path = \"/usr/share/datasets/fashion-mnist\"\n"
    "\n"
    "[loader]\n"
    "batch = 32\n";

/// Wiring order: model, data.train, precision (optional plugin), loader, optimizer.
std::vector<kiln::ParamMap> wire(Config& cfg) {
  std::vector<kiln::ParamMap> out;
  cfg.plugin_type("model");
  out.push_back(cfg.validate("model", kModelSchema));
  cfg.plugin_type("data.train");
  out.push_back(cfg.validate("data.train", kDataSchema));
  cfg.plugin_type("precision", "fp32");
  out.push_back(cfg.validate("precision", {}));
  out.push_back(cfg.validate("loader", kLoaderSchema));
  out.push_back(cfg.validate("optimizer", kOptimizerSchema));
  cfg.check_all_consumed();
  return out;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(resolved)

BOOST_AUTO_TEST_CASE(text_has_tables_in_order_with_types_and_defaults) {
  Config cfg = Config::parse(kRun, "run.toml", {"optimizer.lr=0.05"});
  wire(cfg);
  const std::string text = cfg.resolved_toml();
  const auto model = text.find("[model]\n");
  const auto data = text.find("[data.train]\n");
  const auto precision = text.find("[precision]\ntype = 'fp32'\n");
  const auto loader = text.find("[loader]\n");
  const auto optimizer = text.find("[optimizer]\n");
  BOOST_TEST_REQUIRE(model != std::string::npos, text);
  BOOST_TEST_REQUIRE(data != std::string::npos, text);
  BOOST_TEST_REQUIRE(precision != std::string::npos, text);
  BOOST_TEST_REQUIRE(loader != std::string::npos, text);
  BOOST_TEST_REQUIRE(optimizer != std::string::npos, text);
  BOOST_TEST((model < data && data < precision && precision < loader && loader < optimizer), text);
  BOOST_TEST(text.find("type = 'mlp'") != std::string::npos, text);
  BOOST_TEST(text.find("dropout = 1.0") != std::string::npos, text);   // widened
  BOOST_TEST(text.find("activation = 'relu'") != std::string::npos, text);  // default
  BOOST_TEST(text.find("split = 'train'") != std::string::npos, text);
  BOOST_TEST(text.find("lr = 0.05") != std::string::npos, text);  // override
  BOOST_TEST(text.find("type = 'sgd'") != std::string::npos, text);  // core key named type
  BOOST_TEST(text.find("[data]") == std::string::npos, text);  // no empty parent header
}

BOOST_AUTO_TEST_CASE(round_trip_gives_the_same_values) {
  Config first = Config::parse(kRun, "run.toml", {"loader.last_batch=pad"});
  const std::vector<kiln::ParamMap> a = wire(first);
  const std::string text = first.resolved_toml();

  Config second = Config::parse(text, "run.toml", {});
  BOOST_TEST(second.plugin_type("model") == "mlp");
  BOOST_TEST(second.plugin_type("data.train") == "mnist");
  BOOST_TEST(second.plugin_type("precision") == "fp32");  // the fallback was written out
  const std::vector<kiln::ParamMap> b = wire(second);
  BOOST_TEST_REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST(a[i].table() == b[i].table());
    BOOST_TEST_REQUIRE(a[i].entries().size() == b[i].entries().size(), a[i].table());
    for (const auto& [key, param] : a[i].entries()) {
      BOOST_TEST((b[i].entries().at(key).value == param.value), a[i].table() + "." + key);
    }
  }
  BOOST_TEST(second.resolved_toml() == text);
}

BOOST_AUTO_TEST_SUITE_END()
