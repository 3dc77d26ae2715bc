// `kiln plugins list|show|check|test` output against the fixture libraries. The search path also holds
// the build tree's own plugins (bin/../lib/kiln/plugins), so assertions look for lines, not
// whole outputs.
#define KILN_TEST_MODULE plugins_command
#include "kiln_test_main.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>
#include <tuple>

#include "cli/plugins_command.hpp"
#include "kiln/errors.hpp"
#include "kiln/version.hpp"
#include "test_helpers.hpp"
#include "../integration/json_lite.hpp"

using kiln_test::contains;
using kiln_test::failed_checks;
using kiln_test::fixture_dir;
using kiln_test::fixture_library;

namespace {

std::string run(const std::vector<std::string>& args, const std::vector<std::filesystem::path>& dirs) {
  unsetenv("KILN_PLUGIN_PATH");
  std::ostringstream out;
  BOOST_TEST(kiln::cli::run_plugins_command(args, dirs, out) == 0);
  return out.str();
}

template <class E>
std::string message_of(const std::vector<std::string>& args) {
  try {
    run(args, {fixture_dir("good"), fixture_dir("two")});
  } catch (const E& e) {
    return e.what();
  }
  BOOST_FAIL("expected an exception");
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(list_shows_plugins_shadowed_and_failures) {
  const auto text = run({"list"}, {fixture_dir("good"), fixture_dir("shadow-a"),
                                   fixture_dir("shadow-b"), fixture_dir("abi-major")});
  BOOST_TEST(text.starts_with("NAME"));
  BOOST_TEST(contains(text, "KIND"));
  // Column widths depend on the build tree's own plugins, so check the row's cells in order.
  const auto row_start = text.find("\nfixture-fp32 ");
  BOOST_REQUIRE(row_start != std::string::npos);
  const std::string row = text.substr(row_start + 1, text.find('\n', row_start + 1) - row_start - 1);
  std::size_t at = 0;
  const std::vector<std::string> cells = {"precision", "1.2.3", "Fixture policy that does nothing.",
                                         fixture_library("good").string()};
  for (const std::string& cell : cells) {
    const auto found = row.find("  " + cell, at);
    BOOST_TEST_REQUIRE(found != std::string::npos, "'" << cell << "' missing in row: " << row);
    at = found + cell.size();
  }
  BOOST_TEST(row.ends_with(fixture_library("good").string()));
  BOOST_TEST(contains(text, "\nShadowed (an earlier plugin of the same kind and name is used):\n"
                            "  precision 'dup' 2.0.0 in " + fixture_library("shadow-b").string() +
                                " (using " + fixture_library("shadow-a").string() + ")\n"));
  BOOST_TEST(contains(text, "\nFailed to load:\n  " + fixture_library("abi-major").string() +
                                "\n      plugin library " + fixture_library("abi-major").string() +
                                ": built for Kiln plugin ABI " + std::to_string(KILN_ABI_MAJOR + 1) + "." + std::to_string(KILN_ABI_MINOR)));
  BOOST_TEST(contains(text, "\nSearched: " + fixture_dir("good").string() + " "));
}

BOOST_AUTO_TEST_CASE(list_without_subcommand_is_list) {
  BOOST_TEST(run({}, {fixture_dir("good")}) == run({"list"}, {fixture_dir("good")}));
}

BOOST_AUTO_TEST_CASE(list_json_carries_the_same_facts) {
  const auto json = run({"list", "--json"}, {fixture_dir("good"), fixture_dir("toolchain")});
  BOOST_TEST(json.starts_with("{\"plugins\": ["));
  BOOST_TEST(contains(json, "{\"name\": \"fixture-fp32\", \"kind\": \"precision\", \"version\": "
                            "\"1.2.3\", \"summary\": \"Fixture policy that does nothing.\", "
                            "\"library\": \"" + fixture_library("good").string() +
                                "\", \"abi\": \"" KILN_STRINGIFY(KILN_ABI_MAJOR) "." KILN_STRINGIFY(KILN_ABI_MINOR) "\", \"kiln_version\": \"" KILN_VERSION_STRING
                                "\", \"contract\": \"" KILN_CONTRACT_FINGERPRINT
                                "\", \"params\": [{\"name\": \"scale\", \"type\": \"float\", "
                                "\"default\": \"1.0\", \"choices\": null, \"doc\": \"Constant loss "
                                "scale.\", \"min\": null, \"max\": null, \"range\": \"finite\"}, "
                                "{\"name\": \"mode\", \"type\": \"string\", \"default\": "
                                "\"\\\"fast\\\"\", \"choices\": \"fast|slow\""));
  BOOST_TEST(contains(json, "\"default\": null"));
  BOOST_TEST(contains(json, "\"failures\": [\n  {\"library\": \"" +
                                fixture_library("toolchain").string() + "\", \"reason\": "));
  BOOST_TEST(contains(json, "\"search_path\": [\"" + fixture_dir("good").string() + "\", "));
}

BOOST_AUTO_TEST_CASE(show_lists_details_and_every_parameter) {
  const auto text = run({"show", "fixture-fp32"}, {fixture_dir("good")});
  BOOST_TEST(contains(text, "Plugin Details:\n  Name        fixture-fp32\n"));
  BOOST_TEST(contains(text, "  Kind        precision (selected with type = \"fixture-fp32\" in "
                            "[precision])\n"));
  BOOST_TEST(contains(text, "  Version     1.2.3\n"));
  BOOST_TEST(contains(text, "  Library     " + fixture_library("good").string() + "\n"));
  BOOST_TEST(contains(text, "  Plugin ABI  " KILN_STRINGIFY(KILN_ABI_MAJOR) "." KILN_STRINGIFY(KILN_ABI_MINOR) "\n"));
  BOOST_TEST(contains(text, "  Built with  Kiln SDK " KILN_VERSION_STRING ", contract " KILN_CONTRACT_FINGERPRINT "\n"));
  BOOST_TEST(contains(text, "\nParameters:\n"
                            "  scale   float, default 1.0, finite\n"
                            "          Constant loss scale.\n"
                            "  mode    string, default \"fast\", one of: fast|slow\n"
                            "          How hard to try.\n"
                            "  budget  integer, required\n"
                            "          Steps allowed; no default.\n"));
}

BOOST_AUTO_TEST_CASE(show_json_parses_and_carries_what_the_text_shows) {
  namespace json = kiln::test::json;
  const json::Value doc = json::parse(run({"show", "fixture-fp32", "--json"}, {fixture_dir("good")}));
  const auto& plugins = doc.at("plugins").items;
  BOOST_REQUIRE(plugins.size() == 1u);
  const json::Value& p = plugins[0];
  BOOST_TEST(p.at("name").string == "fixture-fp32");
  BOOST_TEST(p.at("kind").string == "precision");
  BOOST_TEST(p.at("version").string == "1.2.3");
  BOOST_TEST(p.at("summary").string == "Fixture policy that does nothing.");
  BOOST_TEST(p.at("library").string == fixture_library("good").string());
  BOOST_TEST(p.at("abi").string == KILN_STRINGIFY(KILN_ABI_MAJOR) "." KILN_STRINGIFY(KILN_ABI_MINOR));
  BOOST_TEST(p.at("kiln_version").string == KILN_VERSION_STRING);
  BOOST_TEST(p.at("contract").string == KILN_CONTRACT_FINGERPRINT);
  const auto& params = p.at("params").items;
  BOOST_REQUIRE(params.size() == 3u);
  BOOST_TEST(params[0].at("name").string == "scale");
  BOOST_TEST(params[0].at("type").string == "float");
  BOOST_TEST(params[0].at("default").string == "1.0");
  BOOST_TEST(params[0].at("range").string == "finite");
  BOOST_TEST(params[1].at("choices").string == "fast|slow");
  BOOST_TEST(params[2].at("name").string == "budget");
  BOOST_TEST((params[2].at("default").kind == json::Value::Kind::null));  // required
  BOOST_TEST(params[2].at("doc").string == "Steps allowed; no default.");
  // --json may come before the name too; show's entries are list's entries for the same plugin.
  const json::Value listed = json::parse(run({"list", "--json"}, {fixture_dir("good")}));
  const json::Value* same = nullptr;
  for (const auto& q : listed.at("plugins").items) {
    if (q.at("name").string == "fixture-fp32") same = &q;
  }
  BOOST_REQUIRE(same != nullptr);
  BOOST_TEST(same->at("contract").string == p.at("contract").string);
  BOOST_TEST(same->at("params").items.size() == params.size());
  BOOST_TEST(json::parse(run({"show", "--json", "fixture-fp32"}, {fixture_dir("good")})).at("plugins").items.size() == 1u);
}

// [model] also takes the host's fine-tuning keys (train/model_table.hpp): `show` lists them after
// the plugin's own parameters, marked as the host's, and --json has them as host_params. The
// build tree's mlp is on the search path (see the top of this file).
BOOST_AUTO_TEST_CASE(show_model_lists_the_host_keys_of_its_table) {
  const auto text = run({"show", "mlp"}, {});
  const auto host_at = text.find("\nHost keys of [model] (read by Kiln itself, never passed to the plugin):\n");
  BOOST_REQUIRE(host_at != std::string::npos);
  BOOST_TEST(text.find("\nParameters:\n") < host_at);
  const std::string host = text.substr(host_at);
  BOOST_TEST(contains(host, "\n  init          path, default \"\"\n"));
  BOOST_TEST(contains(host, "\n  init_strict   bool, default true\n"));
  BOOST_TEST(contains(host, "\n  init_exclude  string list, default []\n"));
  BOOST_TEST(!contains(text.substr(0, host_at), "  init"), "a host key listed as the plugin's own");

  namespace json = kiln::test::json;
  const json::Value doc = json::parse(run({"show", "mlp", "--json"}, {}));
  const json::Value* model = nullptr;
  for (const auto& p : doc.at("plugins").items) {
    if (p.at("kind").string == "model") model = &p;
  }
  BOOST_REQUIRE(model != nullptr);
  std::vector<std::string> names;
  for (const auto& p : model->at("host_params").items) names.push_back(p.at("name").string);
  BOOST_TEST((names == std::vector<std::string>{"init", "init_strict", "init_exclude", "freeze", "frozen_bn", "sync_bn"}));
  BOOST_TEST(model->at("host_params").items[1].at("type").string == "bool");
  BOOST_TEST(model->at("host_params").items[1].at("default").string == "true");
  for (const auto& p : model->at("params").items) BOOST_TEST(!p.at("name").string.starts_with("init"));
}

BOOST_AUTO_TEST_CASE(other_kinds_have_no_host_keys) {
  BOOST_TEST(!contains(run({"show", "fixture-fp32"}, {fixture_dir("good")}), "Host keys"));
  namespace json = kiln::test::json;
  const json::Value doc = json::parse(run({"show", "fixture-fp32", "--json"}, {fixture_dir("good")}));
  BOOST_TEST(doc.at("plugins").items.at(0).at("host_params").items.empty());
}

BOOST_AUTO_TEST_CASE(show_unknown_name_suggests) {
  const auto message = message_of<kiln::PluginError>({"show", "twin-c"});
  BOOST_TEST(message.starts_with("no plugin named 'twin-c' (did you mean 'twin-"));
  BOOST_TEST(contains(message, "known plugins: fixture-fp32, twin-a, twin-b"));
}

BOOST_AUTO_TEST_CASE(help_anywhere_prints_the_usage) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"}, {"test", "-h"}, {"show", "x", "--help"}}) {
    const std::string text = run(args, {});
    BOOST_TEST(text.starts_with("usage: kiln plugins list [--json]"), text);
    BOOST_TEST(contains(text, "kiln plugins test FILE [--set key=value]... [--timeout SECONDS]"), text);
  }
}

BOOST_AUTO_TEST_CASE(malformed_command_lines_are_config_errors) {
  BOOST_TEST(message_of<kiln::ConfigError>({"lst"}) ==
             "kiln plugins: unknown subcommand 'lst'; usage: `kiln plugins list [--json]`, "
             "`kiln plugins show NAME [--json]`, `kiln plugins check FILE [--json]` or "
             "`kiln plugins test FILE [--set key=value]... [--timeout SECONDS]`");
  BOOST_TEST(contains(message_of<kiln::ConfigError>({"show"}), "`show` takes exactly one plugin name"));
  BOOST_TEST(contains(message_of<kiln::ConfigError>({"show", "--json"}), "`show` takes exactly one plugin name"));
  BOOST_TEST(contains(message_of<kiln::ConfigError>({"list", "--yaml"}),
                      "unexpected argument '--yaml' to `list`"));
}

// `check FILE`: the loader's verdict on one file, what it exports and whether a run uses it.
// ~/.local/lib/kiln/plugins: where someone who cannot write Kiln's prefix puts a plugin, found
// without --plugin-path or KILN_PLUGIN_PATH (the suite itself runs with it switched off).
BOOST_AUTO_TEST_CASE(the_per_user_folder_is_searched_and_named_in_the_fixes) {
  kiln_test::TempDir home;
  const auto user_dir = home.path() / ".local/lib/kiln/plugins";
  kiln_test::ScopedEnvVar no_user("KILN_NO_USER_PLUGINS", nullptr);
  kiln_test::ScopedEnvVar home_var("HOME", home.path().c_str());

  // Missing: searched all the same, so `list` tells where plugins may go.
  const auto empty = run({"list"}, {});
  BOOST_TEST(contains(empty, "\nSearched: " + user_dir.string() + " "), empty);
  const auto off_path = run({"check", fixture_library("good").string()}, {});
  BOOST_TEST(contains(off_path, ", add it to KILN_PLUGIN_PATH or copy the file into " + user_dir.string() +
                                    " (searched: " + user_dir.string() + " "),
             off_path);

  std::filesystem::create_directories(user_dir);
  const auto copied = user_dir / fixture_library("good").filename();
  std::filesystem::copy_file(fixture_library("good"), copied);
  const auto listed = run({"list"}, {});
  const auto row_start = listed.find("\nfixture-fp32 ");
  BOOST_REQUIRE(row_start != std::string::npos);
  BOOST_TEST(listed.substr(row_start, listed.find('\n', row_start + 1) - row_start).ends_with(copied.string()));
  BOOST_TEST(contains(run({"check", copied.string()}, {}), "Found by a run  yes: " + user_dir.string() +
                                                               " is entry 1 of "));

  // KILN_NO_USER_PLUGINS=1 leaves it out, as PYTHONNOUSERSITE leaves out pip's user site.
  kiln_test::ScopedEnvVar off("KILN_NO_USER_PLUGINS", "1");
  const auto without = run({"list"}, {});
  BOOST_TEST(!contains(without, "fixture-fp32"), without);
  BOOST_TEST(!contains(without, user_dir.string()), without);
}

BOOST_AUTO_TEST_CASE(check_reports_a_good_library_and_whether_a_run_finds_it) {
  const auto library = fixture_library("good");
  const auto on_path = run({"check", library.string()}, {fixture_dir("good")});
  BOOST_TEST(contains(on_path, "Library         " + library.string() + "\n"), on_path);
  BOOST_TEST(contains(on_path, "contract " KILN_CONTRACT_FINGERPRINT " (the same as this kiln's)"), on_path);
  BOOST_TEST(contains(on_path, "Plugin          precision 'fixture-fp32' 1.2.3: select it with type = "
                               "\"fixture-fp32\" in [precision]\n"), on_path);
  BOOST_TEST(contains(on_path, "Found by a run  yes: " + fixture_dir("good").string() + " is entry 1 of "), on_path);

  // Off the search path: the fix is named.
  const auto off_path = run({"check", library.string()}, {});
  BOOST_TEST(contains(off_path, "Found by a run  no: " + fixture_dir("good").string() +
                                    " is not on the search path; pass --plugin-path " + fixture_dir("good").string()),
             off_path);

  // Shadowed by a plugin of the same kind and name earlier on the path.
  const auto shadowed = run({"check", fixture_library("shadow-b").string()},
                            {fixture_dir("shadow-a"), fixture_dir("shadow-b")});
  BOOST_TEST(contains(shadowed, "Found by a run  no: "), shadowed);
  BOOST_TEST(contains(shadowed, "from " + fixture_library("shadow-a").string() + ", earlier on the search path, is "
                                "used instead"),
             shadowed);

  // A name a directory scan skips: it passes, but a run never reads it.
  kiln_test::TempDir dir;
  const auto renamed = dir.path() / "myplugin.so";
  std::filesystem::copy_file(library, renamed);
  const auto text = run({"check", renamed.string()}, {dir.path()});
  BOOST_TEST(contains(text, "Checks          passed: "), text);
  BOOST_TEST(contains(text, "no: a run reads only files named libkiln-*.so, and looks first in the one named after "
                            "the plugin it asks for; name this one libkiln-precision-fixture-fp32.so"),
             text);
}

BOOST_AUTO_TEST_CASE(check_of_a_library_the_loader_refuses_gives_its_reason) {
  const auto library = fixture_library("contract");
  const std::string reason = message_of<kiln::PluginError>({"check", library.string()});
  BOOST_TEST(contains(reason, library.string()), reason);
  BOOST_TEST(contains(reason, "was built against Kiln contract 0123456789abcdef"), reason);

  // --json reports it as data, with exit status 1.
  unsetenv("KILN_PLUGIN_PATH");
  std::ostringstream out;
  BOOST_TEST(kiln::cli::run_plugins_command({"check", "--json", library.string()}, {}, out) == 1);
  namespace json = kiln::test::json;
  const json::Value doc = json::parse(out.str());
  BOOST_TEST(!doc.at("loads").boolean);
  BOOST_TEST(doc.at("failure").string == reason);
  BOOST_TEST(doc.at("plugins").items.empty());

  const json::Value good = json::parse(run({"check", fixture_library("good").string(), "--json"}, {fixture_dir("good")}));
  BOOST_TEST(good.at("loads").boolean);
  BOOST_TEST(good.at("plugins").items.size() == 1u);
  BOOST_TEST(good.at("plugins").items[0].at("name").string == "fixture-fp32");
  BOOST_TEST(good.at("found").string.starts_with("yes: "));

  BOOST_TEST(contains(message_of<kiln::ConfigError>({"check"}), "`check` takes exactly one library file"));
}

// `test FILE`: a model, data or communicator plugin exercised against its contract on the cpu
// backend (the build tree's, on the default search path). A correct fixture passes every check; each buggy
// one fails exactly the check meant to catch its bug, with status 1.
namespace {

std::pair<int, std::string> plugin_test(const std::string& fixture, const std::vector<std::string>& options = {}) {
  unsetenv("KILN_PLUGIN_PATH");
  std::ostringstream out;
  std::vector<std::string> args = {"test", fixture_library(fixture).string()};
  args.insert(args.end(), options.begin(), options.end());
  const int status = kiln::cli::run_plugins_command(args, {}, out);
  return {status, out.str()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(test_passes_a_correct_model_and_data_source) {
  for (const char* fixture : {"model-ok", "model-bn", "data-ok"}) {
    const auto [status, report] = plugin_test(fixture);
    BOOST_TEST(status == 0, report);
    BOOST_TEST(failed_checks(report).empty(), report);
    BOOST_TEST(contains(report, "\nall checks passed\n"), report);
  }
  const std::string model = plugin_test("model-ok").second;
  for (const char* check :
       {"build", "parameters", "forward", "backward", "accumulate", "gradient", "frozen", "frozen_bn"}) {
    BOOST_TEST(contains(model, std::string("  ok    ") + check), check << " missing from:\n" << model);
  }
  BOOST_TEST(contains(model, "no buffer kept with all but the last parameter frozen under frozen_bn = \"eval\" (0 "
                             "buffers); the core refuses that setting for this model"),
             model);
  // The SDK's BatchNorm2d keeps both running statistics of its frozen layer.
  const std::string bn = plugin_test("model-bn").second;
  BOOST_TEST(contains(bn, "2 of 2 buffers kept with all but the last parameter frozen under frozen_bn = \"eval\": "
                          "unchanged bit for bit by two training steps"),
             bn);
  BOOST_TEST(contains(plugin_test("data-ok").second, "  ok    threads   40 samples read by 4 threads at once"));
  BOOST_TEST(contains(plugin_test("data-ok").second, "  ok    describe  40 samples of f32(4), 3 classes (3 named): "));
}

BOOST_AUTO_TEST_CASE(test_finds_each_planted_bug) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model-grad-x2", "gradient"}, {"model-unreported", "backward"}, {"model-overwrites", "accumulate"},
      {"model-frozen-stops", "frozen"}, {"model-bn-writes-kept", "frozen_bn"}, {"data-half-written", "read"},
      {"data-bad-label", "read"}, {"data-extra-name", "describe"}};
  for (const auto& [fixture, check] : cases) {
    const auto [status, report] = plugin_test(fixture);
    BOOST_TEST(status == 1, fixture << ":\n" << report);
    BOOST_TEST(failed_checks(report) == std::vector<std::string>{check}, fixture << ":\n" << report);
    BOOST_TEST(contains(report, "\nsome checks FAILED\n"), report);
  }
  BOOST_TEST(contains(plugin_test("model-unreported").second, "never reported as ready: linear.bias"));
  BOOST_TEST(contains(plugin_test("model-overwrites").second, "must add into the gradients (+=)"));
  BOOST_TEST(contains(plugin_test("data-bad-label").second, "has label 3, outside [0, 3)"));
  BOOST_TEST(contains(plugin_test("data-extra-name").second,
                      "names 4 classes but has only 3 (num_classes); a source names at most its classes"));
  BOOST_TEST(contains(plugin_test("model-grad-x2").second, "backward disagrees with the forward pass"));
  BOOST_TEST(contains(plugin_test("model-frozen-stops").second,
                      "with all but the last frozen: trainable 'linear.bias' reported 0 times, not once"));
  BOOST_TEST(contains(plugin_test("model-ok").second, "the model marks and skips the frozen ones"));
  BOOST_TEST(contains(plugin_test("model-bn-writes-kept").second,
                      "'bn.running_mean'[0] is marked kBufferFrozen but two training steps changed it from 0 to 0.5"));
}

// Communicators: the suite in worlds 1-4 (threads of this process), then the failure checks.
BOOST_AUTO_TEST_CASE(test_passes_a_correct_communicator_and_kilns_own) {
  const std::vector<std::string> checks = {"dtypes",     "connect", "all_reduce",   "identical",   "broadcast", "all_gather",
                                           "barrier",    "in_flight", "missing_rank", "silent_peer", "abort"};
  const auto [status, report] = plugin_test("comm-ok");
  BOOST_TEST(status == 0, report);
  BOOST_TEST(failed_checks(report).empty(), report);
  for (const auto& check : checks) BOOST_TEST(contains(report, "  ok    " + check), check << " missing from:\n" << report);
  // The fixture reduces f32 and f64 only: a refusal with an error on every rank is noted, and
  // the suite runs in the dtypes it takes.
  BOOST_TEST(contains(report, "all_reduce takes f32, f64; refuses bf16 (via-store all_reduce: bf16(1) is not "
                              "supported; it reduces f32 and f64)"),
             report);
  BOOST_TEST(contains(report, "  ok    all_reduce    sum, avg, max, min of f32, f64 x 0, 1, 7, 1000003 elements; worlds "
                              "1, 2, 3, 4: 108 cases"),
             report);
  BOOST_TEST(contains(report, "  ok    silent_peer   CommError after "), report);

  const std::filesystem::path plugins = std::filesystem::path(KILN_BINARY_DIR) / "lib/kiln/plugins";
  if (std::filesystem::exists(plugins / "libkiln-comm-gloo.so")) {
    std::ostringstream out;
    BOOST_TEST(kiln::cli::run_plugins_command({"test", (plugins / "libkiln-comm-gloo.so").string()}, {}, out) == 0,
               out.str());
    BOOST_TEST(contains(out.str(), "all_reduce takes f32, f64, bf16, f16\n"), out.str());
    BOOST_TEST(contains(out.str(), "\nall checks passed\n"), out.str());
  }
  // `local` runs one rank: it refuses worlds 2-4 at connect, which is noted, and the checks that
  // need two ranks say they did not run.
  std::ostringstream out;
  BOOST_TEST(kiln::cli::run_plugins_command({"test", (plugins / "libkiln-comm-local.so").string()}, {}, out) == 0,
             out.str());
  BOOST_TEST(contains(out.str(), "; refuses worlds 2, 3, 4 (rank 0 threw: comm.type = \"local\" runs one rank"),
             out.str());
  BOOST_TEST(contains(out.str(), "  -     silent_peer   not run: the communicator refuses world 2\n"), out.str());
  // `mpi` needs its ranks started by mpirun, so here it runs world 1 only; it also stops MPI
  // when its last communicator goes (and after a refused connect), which the idle world of one
  // rank the checks keep alive must prevent, or the checks after the first refusal would fail.
  if (std::filesystem::exists(plugins / "libkiln-comm-mpi.so")) {
    std::ostringstream mpi;
    BOOST_TEST(kiln::cli::run_plugins_command({"test", (plugins / "libkiln-comm-mpi.so").string()}, {}, mpi) == 0,
               mpi.str());
    BOOST_TEST(contains(mpi.str(), "refuses worlds 2, 3, 4 (rank 0 threw: mpi communicator: MPI_COMM_WORLD says rank 0 of "
                                   "1"),
               mpi.str());
    BOOST_TEST(contains(mpi.str(), "  ok    all_reduce    sum, avg, max, min of f32, f64, bf16, f16"), mpi.str());
  }
}

// The nccl library exports two communicators: each is tested under its own name (one [comm]
// table each), and on the cpu backend both say why they cannot connect.
BOOST_AUTO_TEST_CASE(test_runs_every_plugin_of_a_kind_in_one_library) {
  const std::filesystem::path nccl = std::filesystem::path(KILN_BINARY_DIR) / "lib/kiln/plugins/libkiln-comm-nccl.so";
  if (!std::filesystem::exists(nccl)) {  // built only with CUDA
    BOOST_TEST_MESSAGE("no nccl plugin in this build: nothing to check");
    return;
  }
  std::ostringstream out;
  BOOST_TEST(kiln::cli::run_plugins_command({"test", nccl.string()}, {}, out) == 1, out.str());
  for (const char* name : {"nccl-ring", "nccl-tree"}) {
    BOOST_TEST(contains(out.str(), std::string("communicator '") + name + "'"), out.str());
    BOOST_TEST(contains(out.str(), std::string(name) + ": backend 'cpu' is not a CUDA backend"), out.str());
  }
}

BOOST_AUTO_TEST_CASE(test_finds_each_planted_communicator_bug) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"comm-avg-is-sum", "all_reduce", "world 2, all_reduce f32 x 1 avg: #wrong 2 of 2; rank 0 [0]: got -10, want -5"},
      {"comm-gather-reversed", "all_gather", "world 2, all_gather f32 x 1: #wrong 4 of 4"},
      {"comm-broadcast-root-0", "broadcast", "world 2, broadcast f32 x 1 root 1: #wrong 2 of 2"},
      // --timeout 5 scales the failure checks' 2 s timeout and 10 s grace down with the suite's 20 s.
      {"comm-no-timeout", "silent_peer", "blocked past the 0.5 s timeout (+2.5 s); only abort() released it"}};
  for (const auto& [fixture, check, detail] : cases) {
    const auto [status, report] = plugin_test(fixture, {"--timeout", "5"});
    BOOST_TEST(status == 1, fixture << ":\n" << report);
    BOOST_TEST(failed_checks(report) == std::vector<std::string>{check}, fixture << ":\n" << report);
    BOOST_TEST(contains(report, detail), fixture << ":\n" << report);
  }
}

BOOST_AUTO_TEST_CASE(test_takes_a_timeout_for_communicators_only) {
  const std::string comm = fixture_library("comm-ok").string();
  for (const char* bad : {"0.5", "abc", "5s", "7200", "nan", ""}) {
    const std::string msg = message_of<kiln::ConfigError>({"test", comm, "--timeout", bad});
    BOOST_TEST(msg == fmt::format("--timeout {}: give the communicators' timeout as a number of seconds from 1 to 3600 "
                                  "(default 20)",
                                  bad),
               msg);
  }
  const std::string data = fixture_library("data-ok").string();
  const std::string msg = message_of<kiln::ConfigError>({"test", data, "--timeout=30"});
  BOOST_TEST(msg == "--timeout 30: only the communicator checks have timeouts, and " + data +
                        " exports no communicator; leave it out",
             msg);
}

BOOST_AUTO_TEST_CASE(test_refuses_a_set_for_a_table_it_does_not_read) {
  const std::string msg = message_of<kiln::ConfigError>({"test", fixture_library("data-ok").string(), "--set",
                                                         "model.hidden=[4]"});
  BOOST_TEST(msg == "--set model.hidden: unknown table [model]; no component reads it, remove it or fix its name", msg);
}
