// The user-private-group test (rule in private_group.hpp).
#include "private_group.hpp"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>

#include <mutex>

namespace kiln::plugin {

std::string why_group_is_shared(const Group& group, const Account& owner, const std::vector<Account>& accounts) {
  const std::string owner_id = fmt::format("{} (uid {})", owner.name, owner.uid);
  if (owner.gid != group.gid) return fmt::format("is not the primary group of its owner {}", owner_id);
  if (owner.name != group.name) return fmt::format("is not named after its owner {}", owner_id);
  for (const auto& account : accounts) {
    if (account.gid == group.gid && account.uid != owner.uid) {
      return fmt::format("is also the primary group of {} (uid {})", account.name, account.uid);
    }
  }
  for (const auto& member : group.members) {
    if (member != owner.name) return fmt::format("lists {} as a member", member);
  }
  return "";
}

std::string why_group_is_shared(gid_t gid, uid_t owner) {
  // getpwent walks one process-wide cursor, and getgrgid/getpwuid return static storage.
  static std::mutex accounts_lock;
  const std::lock_guard<std::mutex> hold(accounts_lock);
  const ::group* gr = ::getgrgid(gid);
  if (gr == nullptr) return fmt::format("its group, gid {}, cannot be looked up", gid);
  Group group{gr->gr_name, gr->gr_gid, {}};
  for (char** member = gr->gr_mem; member != nullptr && *member != nullptr; ++member) {
    group.members.emplace_back(*member);
  }
  const std::string group_id = fmt::format("its group, {} (gid {}),", group.name, group.gid);
  const ::passwd* pw = ::getpwuid(owner);
  if (pw == nullptr) return fmt::format("{} has an owner (uid {}) that cannot be looked up", group_id, owner);
  const Account owner_account{pw->pw_name, pw->pw_uid, pw->pw_gid};
  std::vector<Account> accounts;
  ::setpwent();
  while (const ::passwd* entry = ::getpwent()) accounts.push_back({entry->pw_name, entry->pw_uid, entry->pw_gid});
  ::endpwent();
  const std::string why = why_group_is_shared(group, owner_account, accounts);
  return why.empty() ? why : fmt::format("{} {}", group_id, why);
}

}  // namespace kiln::plugin
