// Registry tests against the fixture libraries: discovery, every refusal with its message,
// shadowing, factory errors keeping their kiln:: type, deleters running in the plugin, and the
// search path order.
#define KILN_TEST_MODULE plugin_registry
#include "kiln_test_main.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/version.hpp"
#include "plugin/edit_distance.hpp"
#include "test_helpers.hpp"

namespace fs = std::filesystem;
using kiln::plugin::Registry;
using kiln_test::contains;
using kiln_test::fixture_dir;
using kiln_test::fixture_library;
using kiln_test::message_of;
using kiln_test::only_failure;
using kiln_test::scanned;

BOOST_AUTO_TEST_CASE(good_library_is_found_with_its_descriptor) {
  auto registry = scanned({fixture_dir("good")});
  BOOST_TEST(registry.failures().empty());
  BOOST_REQUIRE_EQUAL(registry.plugins().size(), 1u);
  const auto* info = registry.find(KILN_KIND_PRECISION, "fixture-fp32");
  BOOST_REQUIRE(info != nullptr);
  BOOST_TEST(info->version == "1.2.3");
  BOOST_TEST(info->summary == "Fixture policy that does nothing.");
  BOOST_TEST(info->library == fixture_library("good"));
  BOOST_TEST(info->abi_major == KILN_ABI_MAJOR);
  BOOST_TEST(info->abi_minor == KILN_ABI_MINOR);
  BOOST_TEST(info->kiln_version == KILN_VERSION_STRING);
  BOOST_REQUIRE_EQUAL(info->params.size(), 3u);
  BOOST_TEST(std::string(info->params[1].name) == "mode");
  BOOST_TEST(std::string(info->params[1].choices) == "fast|slow");
  BOOST_TEST(info->params[2].default_value == nullptr);
  BOOST_TEST(registry.find(KILN_KIND_MODEL, "fixture-fp32") == nullptr);
}

// ABI 2.2 appended min, max and flags to kiln_param_spec_v1; a 2.1 plugin's table has the shorter
// entries, and reading it with the new stride would take each entry's name from the wrong place.
BOOST_AUTO_TEST_CASE(an_abi_2_1_parameter_table_is_read_with_its_own_entry_size) {
  auto registry = scanned({fixture_dir("abi-2-1-params")});
  BOOST_TEST(registry.failures().empty());
  const auto* info = registry.find(KILN_KIND_PRECISION, "fixture-fp32");
  BOOST_REQUIRE(info != nullptr);
  BOOST_TEST(info->abi_minor == 1u);
  BOOST_REQUIRE_EQUAL(info->params.size(), 3u);
  BOOST_TEST(std::string(info->params[1].name) == "mode");
  BOOST_TEST(std::string(info->params[1].choices) == "fast|slow");
  BOOST_TEST(std::string(info->params[2].name) == "budget");
  BOOST_TEST(info->params[2].default_value == nullptr);
  for (const auto& p : info->params) {
    BOOST_TEST(p.min == nullptr);  // unbounded: the plugin knew of no ranges
    BOOST_TEST(p.max == nullptr);
    BOOST_TEST(p.flags == 0u);
  }
}

BOOST_AUTO_TEST_CASE(created_objects_get_args_and_are_destroyed_by_the_plugin) {
  auto registry = scanned({fixture_dir("good")});
  const auto& info = registry.require(KILN_KIND_PRECISION, "fixture-fp32", "precision");
  kiln::ParamMap params("precision");
  params.set("scale", 4.0, "test");
  kiln::PluginArgs args;
  args.params = &params;
  auto first = registry.create_precision(info, args);
  BOOST_TEST(first->name() == "fixture-fp32");
  BOOST_TEST(first->loss_scale() == 4.0f);
  {
    auto second = registry.create_precision(info, kiln::PluginArgs{});
    BOOST_TEST(second->loss_scale() == 1.0f);
    BOOST_TEST(first->metrics().at("live_instances") == 2.0);
  }
  BOOST_TEST(first->metrics().at("live_instances") == 1.0);
}

BOOST_AUTO_TEST_CASE(creating_with_the_wrong_kind_is_refused) {
  auto registry = scanned({fixture_dir("good")});
  const auto& info = *registry.find(KILN_KIND_PRECISION, "fixture-fp32");
  const auto message = message_of<kiln::PluginError>([&] { registry.create_model(info, {}); });
  BOOST_TEST(message == "precision plugin 'fixture-fp32' (" + fixture_library("good").string() +
                            "): asked to create a model from it; pick a model plugin instead");
}

BOOST_AUTO_TEST_CASE(one_library_may_export_several_plugins) {
  auto registry = scanned({fixture_dir("two")});
  BOOST_TEST(registry.failures().empty());
  BOOST_REQUIRE_EQUAL(registry.plugins().size(), 4u);
  BOOST_TEST(registry.plugins()[0].name == "twin-a");
  BOOST_TEST(registry.plugins()[1].name == "twin-b");
  BOOST_TEST(registry.plugins()[1].summary == "Second twin.");
  BOOST_TEST(registry.plugins()[1].library == fixture_library("two"));
  auto b = registry.create_precision(registry.plugins()[1], {});
  BOOST_TEST(b->name() == "twins");
}

BOOST_AUTO_TEST_CASE(foreign_factory_exception_becomes_plugin_error_naming_the_plugin) {
  auto registry = scanned({fixture_dir("two")});
  const auto& info = registry.require(KILN_KIND_PRECISION, "thrower", "precision");
  const auto message = message_of<kiln::PluginError>([&] { registry.create_precision(info, {}); });
  BOOST_TEST(message == "precision plugin 'thrower' (" + fixture_library("two").string() +
                            "): factory failed: thrower refuses to be built");
}

BOOST_AUTO_TEST_CASE(kiln_factory_exception_keeps_its_type) {
  auto registry = scanned({fixture_dir("two")});
  const auto& info = registry.require(KILN_KIND_PRECISION, "config-rejecter", "precision");
  const auto message = message_of<kiln::ConfigError>([&] { registry.create_precision(info, {}); });
  BOOST_TEST(message == "precision plugin 'config-rejecter' (" + fixture_library("two").string() +
                            "): precision.scale = -1 at run.toml:3 must be positive");
}

BOOST_AUTO_TEST_CASE(abi_major_mismatch_is_refused_naming_both_versions) {
  const auto library = fixture_library("abi-major");
  const auto reason = only_failure(scanned({fixture_dir("abi-major")}), library);
  BOOST_TEST(reason == "plugin library " + library.string() + ": built for Kiln plugin ABI " +
                          std::to_string(KILN_ABI_MAJOR + 1) + "." + std::to_string(KILN_ABI_MINOR) +
                          " but this kiln uses ABI " + std::to_string(KILN_ABI_MAJOR) + "." +
                          std::to_string(KILN_ABI_MINOR) +
                          " (major versions must be equal); rebuild the plugin against the Kiln "
                          KILN_VERSION_STRING " SDK");
}

BOOST_AUTO_TEST_CASE(newer_abi_minor_is_refused) {
  const auto library = fixture_library("abi-minor");
  const auto reason = only_failure(scanned({fixture_dir("abi-minor")}), library);
  const std::string ours = std::to_string(KILN_ABI_MAJOR) + "." + std::to_string(KILN_ABI_MINOR);
  const std::string theirs = std::to_string(KILN_ABI_MAJOR) + "." + std::to_string(KILN_ABI_MINOR + 1);
  BOOST_TEST(reason == "plugin library " + library.string() + ": built for Kiln plugin ABI " +
                          theirs + ", newer than this kiln's ABI " + ours +
                          "; upgrade kiln or rebuild the plugin against the Kiln " KILN_VERSION_STRING
                          " SDK");
}

BOOST_AUTO_TEST_CASE(toolchain_key_mismatch_names_both_keys) {
  const auto library = fixture_library("toolchain");
  const auto reason = only_failure(scanned({fixture_dir("toolchain")}), library);
  BOOST_TEST(contains(reason, library.string()));
  BOOST_TEST(contains(reason, "toolchain key 'fake-cc/fake-stdlib/kiln-abi-1' does not match this "
                              "kiln's '" KILN_TOOLCHAIN_KEY "'"));
  BOOST_TEST(contains(reason, "rebuild the plugin against this Kiln SDK"));
}

BOOST_AUTO_TEST_CASE(contract_fingerprint_mismatch_is_refused_in_one_sentence) {
  const auto library = fixture_library("contract");
  const auto reason = only_failure(scanned({fixture_dir("contract")}), library);
  BOOST_TEST(reason == "plugin 'fixture-fp32' (" + library.string() +
                           ") was built against Kiln contract 0123456789abcdef (SDK " KILN_VERSION_STRING
                           ") but this kiln's contract is " KILN_CONTRACT_FINGERPRINT " (Kiln " KILN_VERSION_STRING
                           "); its interfaces differ, so loading it could crash: rebuild it against "
                           "this Kiln's SDK");
}

BOOST_AUTO_TEST_CASE(library_without_descriptor_is_not_loaded) {
  const auto library = fixture_dir("no-descriptor") / "libkiln-fixture-no-descriptor.so";
  const auto reason = only_failure(scanned({fixture_dir("no-descriptor")}), library);
  BOOST_TEST(contains(reason, library.string() + " is not a Kiln plugin library: no "
                                                 "'kiln_plugin_library' descriptor in section "
                                                 "'kilnplug'"));
}

BOOST_AUTO_TEST_CASE(a_named_pipe_or_a_directory_is_no_library) {
  // `kiln plugins check FIFO` waited for a writer forever; a directory was "a truncated copy?".
  const kiln_test::TempDir tmp;
  const fs::path pipe = tmp.path() / "libkiln-pipe.so";
  BOOST_REQUIRE(::mkfifo(pipe.c_str(), 0600) == 0);
  BOOST_TEST(kiln::plugin::check_library(pipe).failure ==
             "plugin library " + pipe.string() + " is a FIFO (named pipe), not a shared library file");
  BOOST_TEST(kiln::plugin::check_library(tmp.path()).failure ==
             "plugin library " + tmp.path().string() + " is a directory, not a shared library file");
}

BOOST_AUTO_TEST_CASE(null_factory_is_refused) {
  const auto library = fixture_library("null-create");
  const auto reason = only_failure(scanned({fixture_dir("null-create")}), library);
  BOOST_TEST(reason == "plugin library " + library.string() +
                          ": plugin 'fixture-fp32' has a null create function; build it with "
                          "kiln::sdk::plugin<>() from the Kiln SDK");
}

// Names are what configs write; anything else is a damaged or mis-built descriptor, refused
// with the name shown escaped rather than raw bytes in `kiln plugins show`'s key list.
BOOST_AUTO_TEST_CASE(names_a_config_cannot_write_are_refused) {
  auto library = fixture_library("bad-param-name");
  auto reason = only_failure(scanned({fixture_dir("bad-param-name")}), library);
  BOOST_TEST(reason == "plugin library " + library.string() +
                           ": plugin 'fixture-fp32' parameter #1 is named 'li\\x81it', which is not a TOML bare "
                           "key of at most 64 letters, digits, '_' and '-'; the library is damaged or was built wrong",
             reason);
  library = fixture_library("bad-plugin-name");
  reason = only_failure(scanned({fixture_dir("bad-plugin-name")}), library);
  BOOST_TEST(contains(reason, ": plugin #0 is named 'fixture fp32', which is not a name of at most 64"), reason);
}

BOOST_AUTO_TEST_CASE(bad_libraries_do_not_stop_the_scan) {
  auto registry = scanned({fixture_dir("abi-major"), fixture_dir("good"), fixture_dir("toolchain")});
  BOOST_TEST(registry.failures().size() == 2u);
  BOOST_TEST(registry.plugins().size() == 1u);
  BOOST_TEST(registry.find(KILN_KIND_PRECISION, "fixture-fp32")->library == fixture_library("good"));
}

BOOST_AUTO_TEST_CASE(first_plugin_on_the_path_wins_and_later_ones_are_shadowed) {
  auto registry = scanned({fixture_dir("shadow-a"), fixture_dir("shadow-b")});
  BOOST_REQUIRE_EQUAL(registry.plugins().size(), 1u);
  BOOST_TEST(registry.find(KILN_KIND_PRECISION, "dup")->version == "1.0.0");
  BOOST_REQUIRE_EQUAL(registry.shadowed().size(), 1u);
  BOOST_TEST(registry.shadowed()[0].plugin.version == "2.0.0");
  BOOST_TEST(registry.shadowed()[0].plugin.library == fixture_library("shadow-b"));
  BOOST_TEST(registry.shadowed()[0].winner == fixture_library("shadow-a"));

  auto reversed = scanned({fixture_dir("shadow-b"), fixture_dir("shadow-a")});
  BOOST_TEST(reversed.find(KILN_KIND_PRECISION, "dup")->version == "2.0.0");
}

// A library named after the plugin (libkiln-<kind>-<name>.so) that fails to load, earlier in the
// path than the one that provides the plugin, is an error rather than a silent stand-in; later in
// the path it changes nothing. Both for lookups after index() (train, eval) and after scan().
BOOST_AUTO_TEST_CASE(a_broken_library_named_after_the_plugin_earlier_in_the_path_is_refused) {
  const kiln_test::TempDir dir;
  const fs::path broken = dir.path() / "libkiln-precision-fixture-fp32.so";
  {
    std::ofstream out(broken, std::ios::binary);
    out << "\x7f" "ELF";  // the magic, then nothing: a copy cut short
  }
  for (const bool lazy : {true, false}) {
    Registry registry({dir.path(), fixture_dir("good")});
    if (lazy) registry.index();
    else registry.scan();
    const std::string msg = message_of<kiln::PluginError>([&] { (void)registry.find(KILN_KIND_PRECISION, "fixture-fp32"); });
    BOOST_TEST(contains(msg, "precision plugin 'fixture-fp32': " + broken.string() + " comes before " +
                                 fixture_library("good").string() + " in the plugin path but failed to load: " +
                                 broken.string() + " is not a Kiln plugin library"),
               msg);
    BOOST_TEST(contains(msg, "(a truncated copy?); fix or remove it"), msg);
  }
  Registry later({fixture_dir("good"), dir.path()});
  later.scan();
  BOOST_TEST(later.find(KILN_KIND_PRECISION, "fixture-fp32")->library == fixture_library("good"));
}

BOOST_AUTO_TEST_CASE(a_directory_listed_twice_does_not_shadow_itself) {
  auto registry = scanned({fixture_dir("good"), fixture_dir("good") / "." });
  BOOST_TEST(registry.plugins().size() == 1u);
  BOOST_TEST(registry.shadowed().empty());
}

BOOST_AUTO_TEST_CASE(only_libkiln_star_so_files_are_considered) {
  kiln_test::TempDir dir;
  for (const char* name : {"libfoo.so", "libkiln-x.so.1", "kiln-x.so", "libkiln-.so"}) {
    fs::copy_file(fixture_library("good"), dir.path() / name);
  }
  auto registry = scanned({dir.path()});
  BOOST_TEST(registry.plugins().empty());
  BOOST_TEST(registry.failures().empty());
}

BOOST_AUTO_TEST_CASE(world_writable_library_is_refused) {
  kiln_test::TempDir dir;
  const auto copy = dir.path() / "libkiln-copy.so";
  fs::copy_file(fixture_library("good"), copy);
  fs::permissions(copy, fs::perms::others_write, fs::perm_options::add);
  const auto reason = only_failure(scanned({dir.path()}), copy);
  BOOST_TEST(reason == "plugin library " + copy.string() + " is world-writable, so anyone could "
                       "replace its code; refusing to load it (fix with `chmod o-w " +
                           copy.string() + "`)");
}

BOOST_AUTO_TEST_CASE(world_writable_directory_is_refused) {
  kiln_test::TempDir dir;
  fs::copy_file(fixture_library("good"), dir.path() / "libkiln-copy.so");
  fs::permissions(dir.path(), fs::perms::all);
  const auto reason = only_failure(scanned({dir.path()}), dir.path());
  BOOST_TEST(reason == "plugin directory " + dir.path().string() + " is world-writable, so anyone "
                       "could plant code in it; refusing to load plugins from it (fix with `chmod "
                       "o-w " + dir.path().string() + "`)");
}

BOOST_AUTO_TEST_CASE(require_names_alternatives_search_path_and_failures) {
  auto registry = scanned({fixture_dir("good"), fixture_dir("two"), fixture_dir("toolchain"),
                           "/nonexistent/kiln"});
  const auto message = message_of<kiln::PluginError>(
      [&] { registry.require(KILN_KIND_PRECISION, "fixture-fp23", "precision"); });
  BOOST_TEST(contains(message, "no precision plugin named 'fixture-fp23' (asked for by [precision] "
                               "type) (did you mean 'fixture-fp32'?); known precision plugins: "
                               "fixture-fp32, twin-a, twin-b, thrower, config-rejecter; searched: " +
                                   fixture_dir("good").string() + ", "));
  BOOST_TEST(contains(message, "/nonexistent/kiln; 1 library failed to load: plugin library " +
                                   fixture_library("toolchain").string() + ": toolchain key"));
  BOOST_TEST(contains(message, "--plugin-path or KILN_PLUGIN_PATH"));

  const auto other_kind = message_of<kiln::PluginError>(
      [&] { registry.require(KILN_KIND_MODEL, "twin-a", "model"); });
  BOOST_TEST(contains(other_kind, "no model plugin named 'twin-a' (asked for by [model] type); note: "
                                  "'twin-a' is a precision plugin; known model plugins: none"));
}

BOOST_AUTO_TEST_CASE(require_any_kind_finds_by_name_or_suggests) {
  auto registry = scanned({fixture_dir("two")});
  BOOST_TEST(registry.require_any_kind("twin-b").size() == 1u);
  const auto message = message_of<kiln::PluginError>([&] { registry.require_any_kind("twinb"); });
  BOOST_TEST(contains(message, "no plugin named 'twinb' (did you mean 'twin-"));
}

BOOST_AUTO_TEST_CASE(default_search_path_order) {
  setenv("KILN_PLUGIN_PATH", "/env/a::/env/b:/cli/x", 1);
  const auto dirs = kiln::plugin::default_search_path({"/cli/x", "/cli/y/"});
  unsetenv("KILN_PLUGIN_PATH");
  BOOST_REQUIRE_GE(dirs.size(), 5u);
  BOOST_TEST(dirs[0] == fs::path("/cli/x"));
  BOOST_TEST(dirs[1] == fs::path("/cli/y/"));
  BOOST_TEST(dirs[2] == fs::path("/env/a"));
  BOOST_TEST(dirs[3] == fs::path("/env/b"));
  // The install dir relative to this executable (build/tests/../lib/kiln/plugins).
  const auto exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  BOOST_TEST(dirs.back() == (exe_dir / ".." / "lib/kiln/plugins").lexically_normal());
}

BOOST_AUTO_TEST_CASE(user_plugin_dir_comes_after_the_environment_and_before_the_install) {
  kiln_test::ScopedEnvVar no_user("KILN_NO_USER_PLUGINS", nullptr);
  kiln_test::ScopedEnvVar home("HOME", "/home/someone/");
  kiln_test::ScopedEnvVar env("KILN_PLUGIN_PATH", "/env/a");
  const auto dirs = kiln::plugin::default_search_path({"/cli/x"});
  const auto exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  BOOST_REQUIRE_GE(dirs.size(), 4u);
  BOOST_TEST(dirs[0] == fs::path("/cli/x"));
  BOOST_TEST(dirs[1] == fs::path("/env/a"));
  BOOST_TEST(dirs[2] == fs::path("/home/someone/.local/lib/kiln/plugins"));
  BOOST_TEST(dirs[3] == (exe_dir / ".." / "lib/kiln/plugins").lexically_normal());
}

BOOST_AUTO_TEST_CASE(user_plugin_dir_needs_an_absolute_home_and_can_be_switched_off) {
  kiln_test::ScopedEnvVar no_user("KILN_NO_USER_PLUGINS", nullptr);
  {
    kiln_test::ScopedEnvVar home("HOME", nullptr);
    BOOST_TEST(!kiln::plugin::user_plugin_dir().has_value());
  }
  {
    kiln_test::ScopedEnvVar home("HOME", "");
    BOOST_TEST(!kiln::plugin::user_plugin_dir().has_value());
  }
  {
    // Relative: it would depend on the directory kiln runs from.
    kiln_test::ScopedEnvVar home("HOME", "me");
    BOOST_TEST(!kiln::plugin::user_plugin_dir().has_value());
  }
  kiln_test::ScopedEnvVar home("HOME", "/home/me");
  BOOST_TEST(kiln::plugin::user_plugin_dir().value() == fs::path("/home/me/.local/lib/kiln/plugins"));
  {
    kiln_test::ScopedEnvVar off("KILN_NO_USER_PLUGINS", "0");  // "0" means no, as unset
    BOOST_TEST(kiln::plugin::user_plugin_dir().has_value());
  }
  {
    kiln_test::ScopedEnvVar off("KILN_NO_USER_PLUGINS", "1");
    BOOST_TEST(!kiln::plugin::user_plugin_dir().has_value());
    const auto dirs = kiln::plugin::default_search_path({});
    BOOST_TEST((std::find(dirs.begin(), dirs.end(), fs::path("/home/me/.local/lib/kiln/plugins")) == dirs.end()));
  }
}

BOOST_AUTO_TEST_CASE(edit_distance_values) {
  BOOST_TEST(kiln::plugin::edit_distance("mlp", "mpl") == 1u);
  BOOST_TEST(kiln::plugin::edit_distance("cpu", "mpl") == 2u);
  BOOST_TEST(kiln::plugin::suggest_name("mpl", {"cpu", "mlp"}) == " (did you mean 'mlp'?)");
  BOOST_TEST(kiln::plugin::edit_distance("", "abc") == 3u);
  BOOST_TEST(kiln::plugin::edit_distance("resnet", "resnet") == 0u);
  BOOST_TEST(kiln::plugin::suggest_name("gloo", {"local", "glo", "nccl-ring"}) ==
             " (did you mean 'glo'?)");
  BOOST_TEST(kiln::plugin::suggest_name("zzzzzz", {"mlp", "resnet"}).empty());
}
