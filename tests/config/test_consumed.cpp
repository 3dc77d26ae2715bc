// check_all_consumed(): tables nobody validated, keys outside tables, keys in parent tables
// such as [data], each with its location and a suggestion among the tables the run read.
#include <boost/test/unit_test.hpp>

#include "fixtures.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"

using kiln::ConfigError;
using kiln::config::Config;
using kiln::config::test::kDataSchema;
using kiln::config::test::kLoaderSchema;
using kiln::config::test::kModelSchema;
using kiln::config::test::kOptimizerSchema;
using kiln::config::test::message_of;

namespace {
/// Validates the tables a typical wiring reads; [data.eval] only if present.
void wire(Config& cfg) {
  cfg.plugin_type("model");
  cfg.validate("model", kModelSchema);
  cfg.validate("loader", kLoaderSchema);
  cfg.validate("optimizer", kOptimizerSchema);
  cfg.plugin_type("data.train");
  cfg.validate("data.train", kDataSchema);
  if (cfg.has_table("data.eval")) {
    cfg.plugin_type("data.eval");
    cfg.validate("data.eval", kDataSchema);
  }
}

const char* const kBase =
    "[model]\n"                        // 1
    "type = \"mlp\"\n"                 // 2
    "\n"                               // 3
    "[data.train]\n"                   // 4
    "type = \"mnist\"\n"               // 5
    "path = \"/d\"\n";                 // 6
}  // namespace

BOOST_AUTO_TEST_SUITE(consumed)

BOOST_AUTO_TEST_CASE(everything_consumed_passes) {
  Config cfg = Config::parse(std::string(kBase) + "[data.eval]\ntype = \"mnist\"\npath = \"/d\"\n",
                             "run.toml", {});
  wire(cfg);
  BOOST_CHECK_NO_THROW(cfg.check_all_consumed());
}

BOOST_AUTO_TEST_CASE(unknown_table_with_suggestion) {
  Config cfg = Config::parse(std::string(kBase) + "[optimiser]\nlr = 0.1\n", "run.toml", {});
  wire(cfg);
  const std::string msg = message_of<ConfigError>([&] { cfg.check_all_consumed(); });
  BOOST_TEST(msg.find("run.toml:7:1: unknown table [optimiser] (did you mean [optimizer]?)") == 0, msg);
}

BOOST_AUTO_TEST_CASE(unknown_nested_table_suggests_an_asked_table) {
  // data.eval was only asked about (has_table), never validated: still a good suggestion.
  Config cfg = Config::parse(std::string(kBase) + "[data.evl]\npath = \"/d\"\n", "run.toml", {});
  wire(cfg);
  const std::string msg = message_of<ConfigError>([&] { cfg.check_all_consumed(); });
  BOOST_TEST(msg.find("run.toml:7:1: unknown table [data.evl] (did you mean [data.eval]?)") == 0, msg);
}

BOOST_AUTO_TEST_CASE(first_problem_in_file_order_is_reported) {
  Config cfg = Config::parse("[zeta]\nx = 1\n" + std::string(kBase) + "[alpha]\n", "run.toml", {});
  wire(cfg);
  const std::string msg = message_of<ConfigError>([&] { cfg.check_all_consumed(); });
  BOOST_TEST(msg.find("run.toml:1:1: unknown table [zeta]") == 0, msg);
  BOOST_TEST(msg.find("(1 more problem(s) follow)") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(key_outside_any_table) {
  Config cfg = Config::parse("epochs = 3\n" + std::string(kBase), "run.toml", {});
  wire(cfg);
  const std::string msg = message_of<ConfigError>([&] { cfg.check_all_consumed(); });
  BOOST_TEST(msg.find("run.toml:1:1: key 'epochs' is outside any table") == 0, msg);
}

BOOST_AUTO_TEST_CASE(key_in_a_parent_table) {
  Config cfg = Config::parse("[data]\nroot = \"/d\"\n" + std::string(kBase), "run.toml", {});
  wire(cfg);
  const std::string msg = message_of<ConfigError>([&] { cfg.check_all_consumed(); });
  BOOST_TEST(msg.find("run.toml:2:1: unknown key 'root' in [data], which only holds tables") == 0, msg);
}

BOOST_AUTO_TEST_CASE(table_created_by_an_override) {
  Config cfg = Config::parse(kBase, "run.toml", {"optimiser.lr=0.1"});
  wire(cfg);
  const std::string msg = message_of<ConfigError>([&] { cfg.check_all_consumed(); });
  BOOST_TEST(msg.find("--set optimiser.lr: unknown table [optimiser] (did you mean [optimizer]?)") == 0,
             msg);
}

BOOST_AUTO_TEST_SUITE_END()
