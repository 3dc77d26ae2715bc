// Path parameters (KILN_PARAM_PATH): where relative values are anchored, what stays as given,
// and how the type reads in messages and in the resolved config.
#include <boost/test/unit_test.hpp>

#include <array>
#include <filesystem>

#include "fixtures.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"

using kiln::ConfigError;
using kiln::config::Config;
using kiln::config::test::message_of;
namespace fs = std::filesystem;

namespace {

constexpr std::array<kiln_param_spec_v1, 3> kPathSchema{{
    {"root", KILN_PARAM_PATH, nullptr, nullptr, "Data folder."},
    {"cache", KILN_PARAM_PATH, "\"\"", nullptr, "Optional cache file; empty = none."},
    {"labels", KILN_PARAM_PATH, "\"labels.txt\"", nullptr, "Label names."},
}};

}  // namespace

BOOST_AUTO_TEST_SUITE(paths)

BOOST_AUTO_TEST_CASE(relative_file_value_is_anchored_at_the_config_folder) {
  Config cfg = Config::parse("[data]\nroot = \"images/train\"\n", "/srv/project/conf/run.toml", {});
  const auto p = cfg.validate("data", kPathSchema);
  BOOST_TEST(p.get_string("root") == "/srv/project/conf/images/train");
  BOOST_TEST(p.where("root") == "data.root (/srv/project/conf/run.toml:2)");
}

BOOST_AUTO_TEST_CASE(dot_dot_is_normalised_and_absolute_values_are_kept) {
  Config cfg = Config::parse("[data]\nroot = \"../shared/./data/\"\ncache = \"/tmp/x//y\"\n",
                             "/srv/project/conf/run.toml", {});
  const auto p = cfg.validate("data", kPathSchema);
  BOOST_TEST(p.get_string("root") == "/srv/project/shared/data/");
  BOOST_TEST(p.get_string("cache") == "/tmp/x//y");
}

BOOST_AUTO_TEST_CASE(set_value_and_default_are_anchored_at_the_working_directory) {
  Config cfg = Config::parse("[data]\nroot = \"in-file\"\n", "/srv/project/run.toml", {"data.root=mine"});
  const auto p = cfg.validate("data", kPathSchema);
  BOOST_TEST(p.get_string("root") == (fs::current_path() / "mine").string());
  BOOST_TEST(p.get_string("labels") == (fs::current_path() / "labels.txt").string());
  BOOST_TEST(p.get_string("cache") == "", "an empty path means 'not set' and stays empty");
}

BOOST_AUTO_TEST_CASE(bare_config_file_name_means_the_working_directory) {
  Config cfg = Config::parse("[data]\nroot = \"d\"\n", "run.toml", {});
  BOOST_TEST(cfg.validate("data", kPathSchema).get_string("root") == (fs::current_path() / "d").string());
}

BOOST_AUTO_TEST_CASE(non_string_is_refused_as_a_path) {
  Config cfg = Config::parse("[data]\nroot = 3\n", "run.toml", {});
  BOOST_TEST(message_of<ConfigError>([&] { cfg.validate("data", kPathSchema); }) ==
             "run.toml:2:8: [data] root must be a path, found an integer");
}

BOOST_AUTO_TEST_CASE(resolved_config_holds_the_absolute_path) {
  Config cfg = Config::parse("[data]\nroot = \"images\"\n", "/srv/p/run.toml", {});
  cfg.validate("data", kPathSchema);
  BOOST_TEST(cfg.resolved_toml().find("root = '/srv/p/images'") != std::string::npos, cfg.resolved_toml());
}

BOOST_AUTO_TEST_CASE(type_name_is_path) {
  BOOST_TEST(kiln::config::param_type_name(KILN_PARAM_PATH) == "path");
}

BOOST_AUTO_TEST_SUITE_END()
