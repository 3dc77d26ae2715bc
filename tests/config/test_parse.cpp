// Config parsing and --set overrides: syntax error locations, unreadable files, override value
// parsing (TOML value or bare string), malformed overrides, plugin_type lookups, and the small
// helpers (did_you_mean, parse_literal, param_type_name).
#define KILN_TEST_MODULE test_config
#include "kiln_test_main.hpp"

#include <cstdlib>
#include <fstream>

#include "fixtures.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"

using kiln::ConfigError;
using kiln::config::Config;
using kiln::config::test::kDataSchema;
using kiln::config::test::kLoaderSchema;
using kiln::config::test::kModelSchema;
using kiln::config::test::message_of;

namespace {
Config parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return Config::parse(text, "run.toml", overrides);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(parsing)

BOOST_AUTO_TEST_CASE(syntax_error_names_file_line_and_column) {
  const std::string msg = message_of<ConfigError>(
      [] { parse("[model]\ntype = \"mlp\"\nhidden = = 3\n"); });
  BOOST_TEST(msg.rfind("run.toml:3:10: ", 0) == 0, msg);
  BOOST_TEST(msg.find("could not determine value type") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(unreadable_file_is_an_io_error_naming_the_path) {
  const std::string msg = message_of<kiln::IoError>(
      [] { Config::load("/nonexistent/kiln/run.toml", {}); });
  BOOST_TEST(msg.find("cannot read config file '/nonexistent/kiln/run.toml'") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(load_uses_the_path_as_source) {
  const std::string path = std::string(KILN_BINARY_DIR) + "/tests/test_config_load.toml";
  {
    std::ofstream out(path);
    out << "[loader]\nbatch = \"big\"\n";
  }
  Config cfg = Config::load(path, {});
  BOOST_TEST(cfg.source() == path);
  const std::string msg = message_of<ConfigError>([&] { cfg.validate("loader", kLoaderSchema); });
  BOOST_TEST(msg == path + ":2:9: [loader] batch must be an integer, found a string", msg);
}

BOOST_AUTO_TEST_CASE(has_table_follows_dotted_names) {
  Config cfg = parse("[data.train]\npath = \"x\"\n");
  BOOST_TEST(cfg.has_table("data"));
  BOOST_TEST(cfg.has_table("data.train"));
  BOOST_TEST(!cfg.has_table("data.eval"));
  BOOST_TEST(!cfg.has_table("model"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(overrides)

BOOST_AUTO_TEST_CASE(number_replaces_file_value_with_set_origin) {
  Config cfg = parse("[loader]\nbatch = 64\n", {"loader.batch=32"});
  kiln::ParamMap p = cfg.validate("loader", kLoaderSchema);
  BOOST_TEST(p.get_int("batch") == 32);
  BOOST_TEST(p.entries().at("batch").origin == "--set loader.batch");
  BOOST_TEST(p.entries().at("workers").origin == "default");
}

BOOST_AUTO_TEST_CASE(float_bool_and_quoted_string_parse_as_toml) {
  Config cfg = parse("", {"model.dropout=0.5", "loader.shuffle=false", "loader.last_batch=\"pad\""});
  BOOST_TEST(cfg.validate("model", kModelSchema).get_float("dropout") == 0.5);
  kiln::ParamMap loader = cfg.validate("loader", kLoaderSchema);
  BOOST_TEST(loader.get_bool("shuffle") == false);
  BOOST_TEST(loader.get_string("last_batch") == "pad");
}

BOOST_AUTO_TEST_CASE(non_toml_value_is_a_bare_string) {
  Config cfg = parse("[comm]\ntype = \"local\"\n",
                     {"comm.type=gloo", "data.train.path=/data/fashion mnist", "data.train.split= test "});
  BOOST_TEST(cfg.plugin_type("comm") == "gloo");
  kiln::ParamMap p = cfg.validate("data.train", kDataSchema);
  BOOST_TEST(p.get_string("path") == "/data/fashion mnist");
  BOOST_TEST(p.get_string("split") == "test");  // surrounding blanks are trimmed
}

BOOST_AUTO_TEST_CASE(date_like_value_stays_a_string) {
  Config cfg = parse("", {"data.train.path=2024-01-01"});
  BOOST_TEST(cfg.validate("data.train", kDataSchema).get_string("path") == "2024-01-01");
}

BOOST_AUTO_TEST_CASE(list_value) {
  Config cfg = parse("[model]\nhidden = [128]\n", {"model.hidden=[256, 64]"});
  kiln::ParamMap p = cfg.validate("model", kModelSchema);
  BOOST_TEST((p.get<std::vector<std::int64_t>>("hidden") == std::vector<std::int64_t>{256, 64}));
}

BOOST_AUTO_TEST_CASE(creates_intermediate_tables) {
  Config cfg = parse("[model]\ntype = \"mlp\"\n", {"data.train.path=/x"});
  BOOST_TEST(cfg.has_table("data.train"));
  kiln::ParamMap p = cfg.validate("data.train", kDataSchema);
  BOOST_TEST(p.get_string("path") == "/x");
  BOOST_TEST(p.entries().at("path").origin == "--set data.train.path");
}

BOOST_AUTO_TEST_CASE(new_unknown_key_is_blamed_on_the_override) {
  Config cfg = parse("[model]\ntype = \"mlp\"\n", {"model.hiden=[64]"});
  cfg.plugin_type("model");
  const std::string msg = message_of<ConfigError>([&] { cfg.validate("model", kModelSchema); });
  BOOST_TEST(msg == "--set model.hiden: unknown key 'hiden' in [model] (did you mean 'hidden'?); "
                    "valid keys: activation, dropout, hidden, num_classes",
             msg);
}

BOOST_AUTO_TEST_CASE(swapping_a_plugin_drops_the_file_keys_of_the_old_one) {
  const std::string file = "[model]\ntype = \"mlp\"\nhidden = [64]\ndropout = 0.3\n";
  // Another plugin: the file's keys were written for 'mlp' and go; the user's own --set stays.
  Config swapped = parse(file, {"model.dropout=0.1", "model.type=resnet"});
  BOOST_TEST(swapped.plugin_type("model") == "resnet");
  BOOST_REQUIRE_EQUAL(swapped.notes().size(), 1u);
  BOOST_TEST(swapped.notes()[0] ==
                 "--set model.type=resnet replaced the file's 'mlp', so its keys for 'mlp' were dropped: "
                 "hidden (run.toml:3:10)",
             swapped.notes()[0]);
  const kiln::ParamMap p = swapped.validate("model", kModelSchema);
  BOOST_TEST(p.entries().at("hidden").origin == "default");
  BOOST_TEST(p.get_float("dropout") == 0.1);
  // The same plugin named again changes nothing.
  Config same = parse(file, {"model.type=mlp"});
  BOOST_TEST(same.notes().empty());
  BOOST_TEST(same.plugin_type("model") == "mlp");
  BOOST_TEST(same.validate("model", kModelSchema).entries().at("hidden").origin == "run.toml:3");
}

BOOST_AUTO_TEST_CASE(wrong_type_from_override_names_it) {
  Config cfg = parse("", {"loader.batch=lots"});
  const std::string msg = message_of<ConfigError>([&] { cfg.validate("loader", kLoaderSchema); });
  BOOST_TEST(msg == "--set loader.batch: [loader] batch must be an integer, found a string", msg);
}

// Text that looks like a number or a list but is not a TOML value becomes a string; when the key
// wanted something else, the message says what TOML made of the text.
BOOST_AUTO_TEST_CASE(a_value_toml_refuses_is_explained_where_a_string_does_not_fit) {
  Config cfg = parse("", {"loader.batch=99999999999999999999", "model.hidden=[64, 32"});
  std::string msg = message_of<ConfigError>([&] { cfg.validate("loader", kLoaderSchema); });
  BOOST_TEST(msg == "--set loader.batch: [loader] batch must be an integer, found a string; --set read it as text "
                    "because it is not a TOML value (Error while parsing decimal integer: '99999999999999999999' is "
                    "not representable in 64 bits)",
             msg);
  msg = message_of<ConfigError>([&] { cfg.validate("model", kModelSchema); });
  BOOST_TEST(msg.starts_with("--set model.hidden: [model] hidden must be an integer list, found a string; --set read "
                             "it as text because it is not a TOML value (Error while parsing array"),
             msg);

  Config dropout = parse("", {"model.dropout=1e400"});
  msg = message_of<ConfigError>([&] { dropout.validate("model", kModelSchema); });
  BOOST_TEST(msg.ends_with("; --set read it as text because it is not a TOML value (Error while parsing "
                           "floating-point: '1e400' could not be interpreted as a value)"),
             msg);
  Config date = parse("", {"model.num_classes=1979-05-27"});
  msg = message_of<ConfigError>([&] { date.validate("model", kModelSchema); });
  BOOST_TEST(msg.ends_with("; --set read it as text because TOML reads it as a date or time, which no key takes"),
             msg);

  // A later --set of the key, or of a table above it, replaces the value and its explanation.
  Config fixed = parse("", {"loader.batch=1e400", "loader.batch=32"});
  BOOST_TEST(fixed.validate("loader", kLoaderSchema).get<std::int64_t>("batch") == 32);
  Config replaced = parse("", {"loader.batch=1e400", "loader={batch = \"x\"}"});
  msg = message_of<ConfigError>([&] { replaced.validate("loader", kLoaderSchema); });
  BOOST_TEST(msg == "--set loader: [loader] batch must be an integer, found a string", msg);
}

BOOST_AUTO_TEST_CASE(malformed_overrides_are_config_errors_naming_them) {
  std::string msg = message_of<ConfigError>([] { parse("", {"loader.batch"}); });
  BOOST_TEST(msg.find("--set loader.batch: an override needs the form key=value") == 0, msg);
  msg = message_of<ConfigError>([] { parse("", {"=3"}); });
  BOOST_TEST(msg.find("--set =3: '' is not a valid key") == 0, msg);
  msg = message_of<ConfigError>([] { parse("", {"loader..batch=3"}); });
  BOOST_TEST(msg.find("--set loader..batch=3: 'loader..batch' is not a valid key") == 0, msg);
}

// Values end up as C strings (file names the OS opens, printed messages), which end at a NUL:
// refused at parse, in values (also inside lists), keys and overrides alike.
BOOST_AUTO_TEST_CASE(a_nul_character_anywhere_is_refused_where_it_stands) {
  std::string msg = message_of<ConfigError>([] { parse("[data]\npath = \"/data\\u0000x\"\n"); });
  BOOST_TEST(msg == "run.toml:2:8: data.path = '/data' holds a NUL character (\\u0000) at character 6; no key, "
                    "path, name or choice can contain one",
             msg);
  msg = message_of<ConfigError>([] { parse("[model]\nhidden = [1]\nnames = [\"a\", \"b\\u0000\"]\n"); });
  BOOST_TEST(msg.find("run.toml:3:") == 0, msg);
  BOOST_TEST(msg.find("model.names = 'b' holds a NUL character") != std::string::npos, msg);
  msg = message_of<ConfigError>([] { parse("[loader]\n\"ba\\u0000tch\" = 3\n"); });
  BOOST_TEST(msg.find("the key 'ba' of [loader] holds a NUL character (\\u0000) at character 3") != std::string::npos,
             msg);
  msg = message_of<ConfigError>([] { parse("", {"data.path=\"/x\\u0000\""}); });
  BOOST_TEST(msg.find("--set data.path: data.path = '/x' holds a NUL character") == 0, msg);
}

BOOST_AUTO_TEST_CASE(override_through_a_value_is_an_error) {
  const std::string msg = message_of<ConfigError>(
      [] { parse("[model]\nhidden = [1]\n", {"model.hidden.x=3"}); });
  BOOST_TEST(msg == "--set model.hidden.x=3: model.hidden is a list (run.toml:2:10), not a table, "
                    "so it cannot hold 'x'",
             msg);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plugin_type)

BOOST_AUTO_TEST_CASE(reads_the_type_string) {
  Config cfg = parse("[model]\ntype = \"mlp\"\n");
  BOOST_TEST(cfg.plugin_type("model") == "mlp");
}

BOOST_AUTO_TEST_CASE(missing_table) {
  Config cfg = parse("[loader]\nbatch = 1\n");
  const std::string msg = message_of<ConfigError>([&] { cfg.plugin_type("model"); });
  BOOST_TEST(msg.find("run.toml: config has no [model] table; add one with type = \"...\"") == 0, msg);
}

BOOST_AUTO_TEST_CASE(missing_type_is_located) {
  Config cfg = parse("[run]\nseed = 1\n\n[model]\nhidden = [3]\n");
  const std::string msg = message_of<ConfigError>([&] { cfg.plugin_type("model"); });
  BOOST_TEST(msg.find("run.toml:4:1: [model] has no type; add type = \"...\"") == 0, msg);
}

BOOST_AUTO_TEST_CASE(non_string_type_is_located) {
  Config cfg = parse("[model]\ntype = 3\n");
  const std::string msg = message_of<ConfigError>([&] { cfg.plugin_type("model"); });
  BOOST_TEST(msg == "run.toml:2:8: [model] type must be a string naming a plugin, found an integer", msg);
}

BOOST_AUTO_TEST_CASE(fallback_applies_only_when_type_is_absent) {
  Config cfg = parse("[comm]\ntype = \"gloo\"\n[precision]\n");
  BOOST_TEST(cfg.plugin_type("precision", "fp32") == "fp32");
  BOOST_TEST(cfg.plugin_type("backend", "cpu") == "cpu");
  BOOST_TEST(cfg.plugin_type("comm", "local") == "gloo");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(helpers)

BOOST_AUTO_TEST_CASE(did_you_mean_picks_the_closest_within_threshold) {
  using kiln::config::did_you_mean;
  const std::vector<std::string> keys{"activation", "dropout", "hidden", "num_classes"};
  BOOST_TEST(did_you_mean("hiden", keys) == " (did you mean 'hidden'?)");
  BOOST_TEST(did_you_mean("hdiden", keys) == " (did you mean 'hidden'?)");  // transposition + 0
  BOOST_TEST(did_you_mean("numclases", keys) == " (did you mean 'num_classes'?)");
  BOOST_TEST(did_you_mean("width", keys) == "");
  BOOST_TEST(did_you_mean("hidden", keys) == "");  // the word itself is no suggestion
  BOOST_TEST(did_you_mean("x", {}) == "");
}

BOOST_AUTO_TEST_CASE(param_type_names) {
  using kiln::config::param_type_name;
  BOOST_TEST(param_type_name(KILN_PARAM_INT) == "integer");
  BOOST_TEST(param_type_name(KILN_PARAM_FLOAT_LIST) == "float list");
  BOOST_TEST(param_type_name(KILN_PARAM_BOOL) == "bool");
  BOOST_TEST(param_type_name(99) == "unknown type");
}

BOOST_AUTO_TEST_CASE(parse_literal_converts_and_rejects) {
  using kiln::config::parse_literal;
  BOOST_TEST((std::get<std::vector<std::int64_t>>(parse_literal("[128, 64]", KILN_PARAM_INT_LIST, "t")) ==
              std::vector<std::int64_t>{128, 64}));
  BOOST_TEST(std::get<double>(parse_literal("3", KILN_PARAM_FLOAT, "t")) == 3.0);
  BOOST_TEST(std::get<std::string>(parse_literal("\"relu\"", KILN_PARAM_STRING, "t")) == "relu");
  std::string msg = message_of<ConfigError>([] { parse_literal("relu", KILN_PARAM_STRING, "default of x"); });
  BOOST_TEST(msg.find("default of x: 'relu' is not a TOML value (") == 0, msg);
  msg = message_of<ConfigError>([] { parse_literal("0.5", KILN_PARAM_INT, "default of x"); });
  BOOST_TEST(msg == "default of x: '0.5' is a float, expected an integer", msg);
  msg = message_of<ConfigError>([] { parse_literal("[1, 2.5]", KILN_PARAM_INT_LIST, "d"); });
  BOOST_TEST(msg == "d: element 1 of '[1, 2.5]' is a float, expected an integer", msg);
}

BOOST_AUTO_TEST_SUITE_END()
