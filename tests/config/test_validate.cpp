// Schema validation of one table: unknown keys, wrong types (including list elements and
// tables where scalars belong), widening, choices, required keys, defaults, origins, the
// plugin `type` key, and schemas that are themselves wrong.
#include <boost/test/unit_test.hpp>

#include "fixtures.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/core_tables.hpp"

using kiln::ConfigError;
using kiln::config::Config;
using kiln::config::test::kDataSchema;
using kiln::config::test::kLoaderSchema;
using kiln::config::test::kModelSchema;
using kiln::config::test::kOptimizerSchema;
using kiln::config::test::message_of;

namespace {
Config parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return Config::parse(text, "run.toml", overrides);
}
std::string validate_error(const std::string& text, std::string_view table,
                           std::span<const kiln_param_spec_v1> schema) {
  Config cfg = parse(text);
  return message_of<ConfigError>([&] { cfg.validate(table, schema); });
}
}  // namespace

BOOST_AUTO_TEST_SUITE(validate)

BOOST_AUTO_TEST_CASE(unknown_key_has_location_suggestion_and_valid_keys) {
  Config cfg = parse("[model]\ntype = \"mlp\"\nhidden = [64]\nhiden = 3\n");
  BOOST_TEST(cfg.plugin_type("model") == "mlp");
  const std::string msg = message_of<ConfigError>([&] { cfg.validate("model", kModelSchema); });
  BOOST_TEST(msg == "run.toml:4:1: unknown key 'hiden' in [model] (did you mean 'hidden'?); "
                    "valid keys: activation, dropout, hidden, num_classes",
             msg);
}

BOOST_AUTO_TEST_CASE(unknown_key_without_suggestion) {
  const std::string msg = validate_error("[loader]\ncolour = 1\n", "loader", kLoaderSchema);
  BOOST_TEST(msg == "run.toml:2:1: unknown key 'colour' in [loader]; valid keys: batch, last_batch, "
                    "shuffle, workers",
             msg);
}

BOOST_AUTO_TEST_CASE(type_key_belongs_to_plugin_tables_only) {
  // [loader] is no plugin table (nobody asked plugin_type), so `type` is an unknown key there.
  const std::string msg = validate_error("[loader]\ntype = \"x\"\n", "loader", kLoaderSchema);
  BOOST_TEST(msg.find("run.toml:2:1: unknown key 'type' in [loader]") == 0, msg);
  // A plugin table accepts it and does not return it.
  Config cfg = parse("[model]\ntype = \"mlp\"\n");
  cfg.plugin_type("model");
  kiln::ParamMap p = cfg.validate("model", kModelSchema);
  BOOST_TEST(!p.contains("type"));
  BOOST_TEST(p.table() == "model");
}

BOOST_AUTO_TEST_CASE(schema_may_declare_type_for_core_tables) {
  Config cfg = parse("[optimizer]\ntype = \"adam\"\nlr = 1e-3\n");
  kiln::ParamMap p = cfg.validate("optimizer", kOptimizerSchema);
  BOOST_TEST(p.get_string("type") == "adam");
  BOOST_TEST(p.get_float("lr") == 1e-3);
  const std::string msg = validate_error("[optimizer]\ntype = \"adma\"\n", "optimizer", kOptimizerSchema);
  BOOST_TEST(msg == "run.toml:2:8: [optimizer] type = 'adma' is not one of sgd, adam (did you mean 'adam'?)",
             msg);
}

BOOST_AUTO_TEST_CASE(string_where_integer_expected) {
  const std::string msg = validate_error("[loader]\n\nbatch = \"64\"\n", "loader", kLoaderSchema);
  BOOST_TEST(msg == "run.toml:3:9: [loader] batch must be an integer, found a string", msg);
}

BOOST_AUTO_TEST_CASE(float_is_not_accepted_for_integer) {
  const std::string msg = validate_error("[loader]\nbatch = 64.0\n", "loader", kLoaderSchema);
  BOOST_TEST(msg == "run.toml:2:9: [loader] batch must be an integer, found a float", msg);
}

BOOST_AUTO_TEST_CASE(list_element_of_wrong_type_names_its_index) {
  const std::string msg = validate_error("[model]\nhidden = [128, \"64\"]\n", "model", kModelSchema);
  BOOST_TEST(msg == "run.toml:2:16: [model] hidden[1] must be an integer, found a string", msg);
}

BOOST_AUTO_TEST_CASE(scalar_for_list_suggests_brackets) {
  const std::string msg = validate_error("[model]\nhidden = 128\n", "model", kModelSchema);
  BOOST_TEST(msg == "run.toml:2:10: [model] hidden must be an integer list, found an integer; "
                    "write hidden = [128] for a one-element list",
             msg);
}

BOOST_AUTO_TEST_CASE(table_where_scalar_expected) {
  std::string msg = validate_error("[loader.batch]\nsize = 3\n", "loader", kLoaderSchema);
  BOOST_TEST(msg.find("[loader] batch must be an integer, found a table") != std::string::npos, msg);
  msg = validate_error("[loader]\nbatch = { size = 3 }\n", "loader", kLoaderSchema);
  BOOST_TEST(msg == "run.toml:2:9: [loader] batch must be an integer, found a table", msg);
}

BOOST_AUTO_TEST_CASE(bool_is_strict) {
  const std::string msg = validate_error("[loader]\nshuffle = 1\n", "loader", kLoaderSchema);
  BOOST_TEST(msg == "run.toml:2:11: [loader] shuffle must be a bool, found an integer", msg);
}

BOOST_AUTO_TEST_CASE(integers_widen_to_floats) {
  Config cfg = parse("[model]\ndropout = 0\n[data.train]\npath = \"p\"\nmean = [1, 0.25]\n");
  BOOST_TEST(cfg.validate("model", kModelSchema).get_float("dropout") == 0.0);
  kiln::ParamMap d = cfg.validate("data.train", kDataSchema);
  BOOST_TEST((d.get<std::vector<double>>("mean") == std::vector<double>{1.0, 0.25}));
}

BOOST_AUTO_TEST_CASE(choices_with_suggestion) {
  const std::string msg =
      validate_error("[model]\nactivation = \"rleu\"\n", "model", kModelSchema);
  BOOST_TEST(msg == "run.toml:2:14: [model] activation = 'rleu' is not one of relu, tanh "
                    "(did you mean 'relu'?)",
             msg);
}

BOOST_AUTO_TEST_CASE(required_key_missing_names_file_table_and_doc) {
  std::string msg = validate_error("[data.train]\nsplit = \"test\"\n", "data.train", kDataSchema);
  BOOST_TEST(msg == "run.toml:1:1: [data.train] needs key 'path' (Directory holding the IDX files.); "
                    "add path = <string> to [data.train]",
             msg);
  msg = validate_error("[model]\n", "data.train", kDataSchema);
  BOOST_TEST(msg.find("run.toml: [data.train] needs key 'path' (Directory holding the IDX files.)") == 0,
             msg);
}

BOOST_AUTO_TEST_CASE(defaults_fill_in_with_origins) {
  Config cfg = parse("[run]\nseed = 1\n[model]\ntype = \"mlp\"\nhidden = [64, 32]\n");
  cfg.plugin_type("model");
  kiln::ParamMap p = cfg.validate("model", kModelSchema);
  BOOST_TEST((p.get<std::vector<std::int64_t>>("hidden") == std::vector<std::int64_t>{64, 32}));
  BOOST_TEST(p.entries().at("hidden").origin == "run.toml:5");
  BOOST_TEST(p.get_string("activation") == "relu");
  BOOST_TEST(p.get_float("dropout") == 0.2);
  BOOST_TEST(p.get_int("num_classes") == 10);
  BOOST_TEST(p.entries().at("dropout").origin == "default");
  BOOST_TEST(p.where("hidden") == "model.hidden (run.toml:5)");
  BOOST_TEST(p.entries().size() == 4u);
}

BOOST_AUTO_TEST_CASE(missing_table_is_all_defaults) {
  Config cfg = parse("");
  kiln::ParamMap p = cfg.validate("loader", kLoaderSchema);
  BOOST_TEST(p.get_int("batch") == 64);
  BOOST_TEST(p.get_bool("shuffle") == true);
  BOOST_TEST(p.get_string("last_batch") == "drop");
}

BOOST_AUTO_TEST_CASE(parent_that_is_not_a_table) {
  const std::string msg = validate_error("data = 3\n", "data.train", kDataSchema);
  BOOST_TEST(msg == "run.toml:1:8: data must be a table to hold [data.train], found an integer", msg);
}

BOOST_AUTO_TEST_CASE(bad_schema_default_blames_the_schema) {
  static constexpr kiln_param_spec_v1 bad[] = {
      {"hidden", KILN_PARAM_INT_LIST, "[12", nullptr, "Widths."}};
  std::string msg = validate_error("", "model", bad);
  BOOST_TEST(msg.find("bad default in the schema of [model] for key 'hidden': '[12' is not a TOML value (") == 0,
             msg);
  static constexpr kiln_param_spec_v1 wrong_type[] = {
      {"dropout", KILN_PARAM_FLOAT, "\"high\"", nullptr, "Dropout."}};
  msg = validate_error("", "model", wrong_type);
  BOOST_TEST(msg == "bad default in the schema of [model] for key 'dropout': '\"high\"' is a string, "
                    "expected a float",
             msg);
  static constexpr kiln_param_spec_v1 not_a_choice[] = {
      {"act", KILN_PARAM_STRING, "\"gelu\"", "relu|tanh", "Activation."}};
  msg = validate_error("", "model", not_a_choice);
  BOOST_TEST(msg == "bad default in the schema of [model] for key 'act': 'gelu' is not one of relu, tanh",
             msg);
}

BOOST_AUTO_TEST_CASE(plugin_schema_must_not_declare_type) {
  Config cfg = parse("[optimizer]\ntype = \"adam\"\n");
  cfg.plugin_type("optimizer");
  const std::string msg = message_of<ConfigError>([&] { cfg.validate("optimizer", kOptimizerSchema); });
  BOOST_TEST(msg.find("the schema of plugin table [optimizer] declares 'type'") == 0, msg);
}

// Found by tests/fuzz (plugin_schema): a path with choices validated its raw value, stored the
// path resolved against the config's folder, and the resolved config then failed its own choices.
BOOST_AUTO_TEST_CASE(only_strings_may_have_choices) {
  static constexpr kiln_param_spec_v1 schema[] = {
      {"weights", KILN_PARAM_PATH, "\"a\"", "a|b", "A file."}};
  const std::string msg = validate_error("[model]\nweights = \"b\"\n", "model", schema);
  BOOST_TEST(msg == "the schema of [model]: 'weights' is a path with choices, which only strings and string lists "
                    "can have; fix the schema",
             msg);
}

BOOST_AUTO_TEST_CASE(string_list_choices_name_the_element) {
  static constexpr kiln_param_spec_v1 schema[] = {
      {"metrics", KILN_PARAM_STRING_LIST, "[]", "loss|accuracy", "Metrics to log."}};
  const std::string msg = validate_error("[log]\nmetrics = [\"loss\", \"acuracy\"]\n", "log", schema);
  BOOST_TEST(msg == "run.toml:2:20: [log] metrics[1] = 'acuracy' is not one of loss, accuracy "
                    "(did you mean 'accuracy'?)",
             msg);
}

// The core's own types ([optimizer], [schedule]) are checked where the type is written: found by
// tests/fuzz (a mutated type said "optimizer.type = '{gd' is not one of ..." with no file or line).
BOOST_AUTO_TEST_CASE(a_core_type_outside_its_choices_names_file_and_line) {
  static constexpr std::string_view kTypes[] = {"sgd", "adam", "adamw"};
  Config cfg = parse("[run]\nepochs = 1\n[optimizer]\ntype = \"adamm\"\n");
  std::string msg = message_of<ConfigError>([&] { cfg.plugin_type("optimizer", "adam", kTypes); });
  BOOST_TEST(msg == "run.toml:4:8: [optimizer] type = 'adamm' is not one of sgd, adam, adamw (did you mean 'adam'?)",
             msg);
  Config overridden = parse("[optimizer]\ntype = \"sgd\"\n", {"optimizer.type=lamb"});
  msg = message_of<ConfigError>([&] { overridden.plugin_type("optimizer", "adam", kTypes); });
  BOOST_TEST(msg.find("--set optimizer.type: [optimizer] type = 'lamb' is not one of") == 0, msg);
  Config absent = parse("[run]\nepochs = 1\n");
  BOOST_TEST(absent.plugin_type("optimizer", "adam", kTypes) == "adam");
}

// Each [schedule] type has its own keys (lr_schedule.hpp). A config.toml written before that listed
// min_lr, milestones and gamma at their defaults under every type: it still loads (kiln eval on an
// older run directory), while a value such a key would have had no effect with is refused as the
// unknown key it is.
BOOST_AUTO_TEST_CASE(an_older_config_toml_listing_every_schedule_key_still_loads) {
  Config old = parse("[schedule]\ngamma = 0.10000000000000001\nmilestones = []\nmin_lr = 0.0\ntype = 'constant'\n"
                     "warmup_epochs = 0.0\n");
  const kiln::train::CoreTables tables = kiln::train::validate_core_tables(old);
  BOOST_TEST(tables.schedule_type == "constant");
  BOOST_TEST(tables.schedule.entries().size() == 1u);  // warmup_epochs
  BOOST_TEST(old.resolved_toml().find("gamma") == std::string::npos);
  Config step = parse("[schedule]\ntype = \"step\"\nmilestones = [2]\nmin_lr = 0.0\n");
  BOOST_TEST(kiln::train::validate_core_tables(step).schedule.get<std::vector<std::int64_t>>("milestones").size() == 1u);

  Config cosine = parse("[schedule]\ntype = \"cosine\"\ngamma = 0.5\n");
  std::string msg = message_of<ConfigError>([&] { (void)kiln::train::validate_core_tables(cosine); });
  BOOST_TEST(msg == "run.toml:3:1: unknown key 'gamma' in [schedule]; valid keys: min_lr, warmup_epochs", msg);
  Config constant = parse("[schedule]\npatience = 3\n");
  msg = message_of<ConfigError>([&] { (void)kiln::train::validate_core_tables(constant); });
  BOOST_TEST(msg.find("run.toml:2:1: unknown key 'patience' in [schedule]") == 0u, msg);
}

BOOST_AUTO_TEST_SUITE_END()
