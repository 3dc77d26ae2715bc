// Whether a file's group is its owner's alone: a user-private group (private to core/plugin).
// Debian and Ubuntu give each account a group of its own name and, with pam_umask's `usergroups`
// (Ubuntu's default), a umask of 002, so every folder a user makes is group-writable. Group
// write then grants nothing: the only member is the owner. path_trust accepts such a component,
// as Debian's OpenSSH accepts group-writable ~/.ssh files whose group has the owner alone.
//
// The test is strict: the group must be the owner's primary group, carry the owner's name, and
// have no other member, neither an account whose primary group it is nor one listed in the
// group's own member list. A group no account has as its primary (a setgid program's) is not
// private. Accounts are read with getpwent, so on a site whose directory service does not
// enumerate its users an unseen remote member goes unnoticed; the name and primary-group
// conditions keep such a group from passing by accident (sites name shared groups otherwise).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kiln::plugin {

struct Account {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;  // primary group
};

struct Group {
  std::string name;
  gid_t gid = 0;
  std::vector<std::string> members;  // supplementary members (the group file's last field)
};

/// Why `group` is not `owner`'s alone ("" when it is), worded to follow "its group, daemon (gid 1),":
/// "is the primary group of backup (uid 34)", "lists alice as a member", "is not the primary group
/// of root (uid 0)", "is not named after its owner root (uid 0)". `accounts` are every account.
std::string why_group_is_shared(const Group& group, const Account& owner, const std::vector<Account>& accounts);

/// The same for this system's accounts and groups (getgrgid, getpwuid, getpwent), naming the group:
/// "its group, daemon (gid 1), is also the primary group of daemon (uid 1)". A group or owner
/// that cannot be looked up counts as shared ("its group, gid 4242, cannot be looked up").
std::string why_group_is_shared(gid_t gid, uid_t owner);

}  // namespace kiln::plugin
