// Plugin trust: the whole written and resolved path is checked (owner root or the user, no group
// or other write except root's sticky directories and the owner's private group), relative
// KILN_PLUGIN_PATH entries are refused, symlink loops get a clear reason, a library whose
// initialisation ends the process is refused without ending this one, and a lookup after index()
// loads only what it needs.
#define KILN_TEST_MODULE plugin_trust
#include "kiln_test_main.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"
#include "plugin/private_group.hpp"
#include "test_helpers.hpp"

namespace fs = std::filesystem;
using kiln::plugin::Registry;
using kiln_test::contains;
using kiln_test::fixture_library;
using kiln_test::only_failure;
using kiln_test::scanned;
using kiln_test::TempDir;

namespace {

/// `dir` (created 0755) holding a copy of the good fixture.
fs::path plugin_dir_with_copy(const fs::path& dir, const std::string& file = "libkiln-copy.so") {
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  fs::copy_file(fixture_library("good"), dir / file);
  return dir;
}

/// A group the directory may be given whose write access reaches beyond the user: for root any
/// other account's primary group, for anyone else a supplementary group; none if there is none.
std::optional<gid_t> group_that_is_not_ours_alone() {
  if (::geteuid() == 0) {
    std::optional<gid_t> found;
    ::setpwent();
    while (const ::passwd* pw = ::getpwent()) {
      if (pw->pw_gid != ::getegid()) {
        found = pw->pw_gid;
        break;
      }
    }
    ::endpwent();
    return found;
  }
  std::vector<gid_t> groups(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
  groups.resize(static_cast<std::size_t>(std::max(::getgroups(static_cast<int>(groups.size()), groups.data()), 0)));
  for (const gid_t gid : groups) {
    if (gid != ::getegid()) return gid;
  }
  return std::nullopt;
}

}  // namespace

BOOST_AUTO_TEST_CASE(trusted_directory_under_tmp_is_accepted) {
  // /tmp is world-writable with the sticky bit and owned by root: others cannot replace our
  // entries in it, so a private directory below it is fine.
  TempDir tmp;
  const auto dir = plugin_dir_with_copy(tmp.path() / "plugins");
  auto registry = scanned({dir});
  BOOST_TEST(registry.failures().empty());
  BOOST_TEST(registry.plugins().size() == 1u);
}

BOOST_AUTO_TEST_CASE(group_writable_directory_is_refused) {
  const auto shared = group_that_is_not_ours_alone();
  if (!shared) {
    BOOST_TEST_MESSAGE("skipped: no group other than the user's primary one to give the directory to");
    return;
  }
  TempDir tmp;
  const auto dir = plugin_dir_with_copy(tmp.path() / "plugins");
  BOOST_REQUIRE(::chown(dir.c_str(), static_cast<uid_t>(-1), *shared) == 0);
  fs::permissions(dir, fs::perms::group_write, fs::perm_options::add);
  const ::passwd* me = ::getpwuid(::geteuid());
  BOOST_REQUIRE(me != nullptr);
  BOOST_TEST(only_failure(scanned({dir}), dir) ==
             "plugin directory " + dir.string() + " is group-writable and its group, " + ::getgrgid(*shared)->gr_name +
                 " (gid " + std::to_string(*shared) + "), is not the primary group of its owner " + me->pw_name +
                 " (uid " + std::to_string(::geteuid()) + "), so someone other than you or root could plant code in "
                 "it; refusing to load plugins from it (fix with `chmod g-w " + dir.string() + "`)");
}

BOOST_AUTO_TEST_CASE(group_writable_directories_of_a_private_group_are_accepted) {
  // Ubuntu's umask 002 makes every folder a user creates group-writable by the user's own
  // group, whose only member is the user: write access for it grants no one else anything.
  if (!kiln::plugin::why_group_is_shared(::getegid(), ::geteuid()).empty()) {
    BOOST_TEST_MESSAGE("skipped: this user's primary group has other members");
    return;
  }
  TempDir tmp;
  const fs::path parent = tmp.path() / "mine";
  const auto dir = plugin_dir_with_copy(parent / "plugins");
  BOOST_REQUIRE(::chown(parent.c_str(), static_cast<uid_t>(-1), ::getegid()) == 0);
  BOOST_REQUIRE(::chown(dir.c_str(), static_cast<uid_t>(-1), ::getegid()) == 0);
  fs::permissions(parent, fs::perms::group_write, fs::perm_options::add);
  fs::permissions(dir, fs::perms::group_write, fs::perm_options::add);
  auto registry = scanned({dir});
  BOOST_TEST(registry.failures().empty());
  BOOST_TEST(registry.plugins().size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_group_is_private_only_when_named_for_its_one_member) {
  using kiln::plugin::Account;
  using kiln::plugin::Group;
  using kiln::plugin::why_group_is_shared;
  const Account ann{"ann", 1000, 1000};
  const Account bob{"bob", 1001, 100};
  const std::vector<Account> accounts{{"root", 0, 0}, ann, bob};
  // Debian's adduser: group ann (gid 1000), primary group of ann alone, no listed members.
  BOOST_TEST(why_group_is_shared(Group{"ann", 1000, {}}, ann, accounts) == "");
  BOOST_TEST(why_group_is_shared(Group{"ann", 1000, {"ann"}}, ann, accounts) == "");
  // A shared group: bob's primary group "users", or one that lists someone else.
  BOOST_TEST(why_group_is_shared(Group{"users", 100, {}}, bob, accounts) == "is not named after its owner bob (uid 1001)");
  BOOST_TEST(why_group_is_shared(Group{"ann", 1000, {"ann", "bob"}}, ann, accounts) == "lists bob as a member");
  std::vector<Account> with_guest = accounts;
  with_guest.push_back({"guest", 1002, 1000});
  BOOST_TEST(why_group_is_shared(Group{"ann", 1000, {}}, ann, with_guest) ==
             "is also the primary group of guest (uid 1002)");
  // A group ann is only a member of (a supplementary one, or a setgid program's with no one).
  BOOST_TEST(why_group_is_shared(Group{"users", 100, {"ann"}}, ann, accounts) ==
             "is not the primary group of its owner ann (uid 1000)");
  BOOST_TEST(why_group_is_shared(Group{"games", 60, {}}, ann, accounts) ==
             "is not the primary group of its owner ann (uid 1000)");
}

BOOST_AUTO_TEST_CASE(directory_inside_a_world_writable_parent_is_refused) {
  // The directory itself is 0755, but anyone may rename it away and put another in its place.
  TempDir tmp;
  const fs::path parent = tmp.path() / "open";
  const auto dir = plugin_dir_with_copy(parent / "plugins");
  fs::permissions(parent, fs::perms::all);
  BOOST_TEST(only_failure(scanned({dir}), dir) ==
             "plugin directory " + dir.string() + " is inside " + parent.string() + ", which is world-writable, so "
             "someone other than you or root could replace what it holds; refusing to load plugins from it (fix with "
             "`chmod o-w " + parent.string() + "`)");
}

BOOST_AUTO_TEST_CASE(symlink_to_a_library_in_a_world_writable_directory_is_refused) {
  TempDir tmp;
  const fs::path open = tmp.path() / "open";
  plugin_dir_with_copy(open, "libkiln-real.so");
  fs::permissions(open, fs::perms::all);
  const fs::path dir = tmp.path() / "plugins";
  fs::create_directories(dir);
  fs::create_symlink(open / "libkiln-real.so", dir / "libkiln-link.so");
  BOOST_TEST(only_failure(scanned({dir}), dir / "libkiln-link.so") ==
             "plugin library " + (dir / "libkiln-link.so").string() + " is inside " + open.string() +
                 ", which is world-writable, so someone other than you or root could replace what it holds; refusing "
                 "to load it (fix with `chmod o-w " + open.string() + "`)");
}

BOOST_AUTO_TEST_CASE(directory_owned_by_another_user_is_refused) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: giving a directory to another user needs root");
    return;
  }
  TempDir tmp;
  const auto dir = plugin_dir_with_copy(tmp.path() / "plugins");
  BOOST_REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
  const std::string reason = only_failure(scanned({dir}), dir);
  BOOST_TEST(contains(reason, "plugin directory " + dir.string() + " is owned by "), reason);
  BOOST_TEST(contains(reason, "(uid 65534), not by you or root, so that user could plant code in it; refusing to load "
                              "plugins from it (fix with `chown "),
             reason);
}

BOOST_AUTO_TEST_CASE(symlink_loops_are_reported) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "plugins";
  fs::create_directories(dir);
  fs::create_symlink(dir / "libkiln-loop.so", dir / "libkiln-loop.so");
  BOOST_TEST(only_failure(scanned({dir}), dir / "libkiln-loop.so") ==
             "plugin library " + (dir / "libkiln-loop.so").string() +
                 " cannot be resolved: a symlink loop (too many levels of symbolic links); fix or remove the link");

  const fs::path looped_dir = tmp.path() / "looped";
  fs::create_symlink(looped_dir, looped_dir);
  BOOST_TEST(only_failure(scanned({looped_dir}), looped_dir) ==
             "plugin directory " + looped_dir.string() +
                 " cannot be resolved: a symlink loop (too many levels of symbolic links); fix or remove the link");
}

BOOST_AUTO_TEST_CASE(relative_plugin_path_entry_is_refused) {
  ::setenv("KILN_PLUGIN_PATH", "/abs/ok:plugins/here", 1);
  std::string message;
  try {
    (void)kiln::plugin::default_search_path({});
  } catch (const kiln::PluginError& e) {
    message = e.what();
  }
  ::unsetenv("KILN_PLUGIN_PATH");
  BOOST_TEST(contains(message, "KILN_PLUGIN_PATH entry 'plugins/here' is a relative path"), message);
  BOOST_TEST(contains(message, "use an absolute path (e.g. KILN_PLUGIN_PATH=" + (fs::current_path() / "plugins/here").string()),
             message);
}

BOOST_AUTO_TEST_CASE(library_that_exits_while_loading_is_refused) {
  // Its constructor calls _exit(0): loaded in this process, the test runner would just stop
  // with status 0. The probe child takes the exit instead.
  const auto registry = scanned({fixture_library("exits").parent_path()});
  BOOST_TEST(only_failure(registry, fixture_library("exits")) ==
             "plugin library " + fixture_library("exits").string() +
                 " ended the loading process with exit status 0 while loading (its initialisation code calls exit); a "
                 "plugin must never end the process; refusing it (checked in a child process, so this run was not "
                 "affected; remove the library from the plugin path or fix it)");
}

BOOST_AUTO_TEST_CASE(library_that_crashes_while_loading_is_refused) {
  const auto registry = scanned({fixture_library("crashes").parent_path()});
  const std::string reason = only_failure(registry, fixture_library("crashes"));
  BOOST_TEST(contains(reason, "plugin library " + fixture_library("crashes").string() +
                                  " killed the loading process with signal 11 (SIGSEGV) while loading"),
             reason);
}

BOOST_AUTO_TEST_CASE(a_lookup_loads_only_the_library_named_after_the_plugin) {
  // One directory: the plugin a run asks for, in its own file, next to a library that would end
  // the process and a file that is not even a library.
  TempDir tmp;
  const fs::path dir = tmp.path() / "plugins";
  plugin_dir_with_copy(dir, "libkiln-precision-fixture-fp32.so");
  fs::copy_file(fixture_library("exits"), dir / "libkiln-exits.so");
  { std::ofstream(dir / "libkiln-garbage.so") << "not an ELF file"; }

  Registry registry({dir});
  registry.index();
  const auto* info = registry.find(KILN_KIND_PRECISION, "fixture-fp32");
  BOOST_REQUIRE(info != nullptr);
  BOOST_TEST(info->library == dir / "libkiln-precision-fixture-fp32.so");
  BOOST_TEST(registry.failures().empty());  // the others were never opened
  BOOST_TEST(registry.plugins().size() == 1u);

  // A plugin no file is named after: every library is tried, and require() reports why each
  // failed (the exiting one without ending this process).
  std::string message;
  try {
    registry.require(KILN_KIND_PRECISION, "nowhere", "precision");
  } catch (const kiln::PluginError& e) {
    message = e.what();
  }
  BOOST_TEST(contains(message, "no precision plugin named 'nowhere'"), message);
  BOOST_TEST(contains(message, "2 libraries failed to load"), message);
  BOOST_TEST(contains(message, (dir / "libkiln-exits.so").string() + " ended the loading process with exit status 0"),
             message);
  BOOST_TEST(info->name == "fixture-fp32");  // still valid after the registry grew
}
