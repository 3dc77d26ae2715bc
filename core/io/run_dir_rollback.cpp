// RunDirRollback: snapshot of a run directory, and removal of what was added since.
#include "kiln/io/run_dir_rollback.hpp"

#include <vector>

namespace kiln::io {
namespace fs = std::filesystem;

namespace {

// Every entry under `dir` (symbolic links are listed, never followed).
std::set<fs::path> entries_under(const fs::path& dir) {
  std::set<fs::path> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.insert(it->path());
  }
  return out;
}

}  // namespace

RunDirRollback::RunDirRollback(const fs::path& dir, std::vector<fs::path> created) : dir_(fs::absolute(dir)) {
  for (const fs::path& folder : created) created_.push_back(fs::absolute(folder));
  std::error_code ec;
  if (created_.empty() && !fs::exists(dir_, ec)) {
    // runs/<stamp> with no runs/ yet: the start makes both.
    for (fs::path up = dir_; !up.empty() && up != up.root_path() && !fs::exists(up, ec); up = up.parent_path()) {
      created_.insert(created_.begin(), up);
    }
  }
  dir_is_new_ = !created_.empty() && created_.back() == dir_;
  if (!dir_is_new_) existing_ = entries_under(dir_);
}

RunDirRollback::~RunDirRollback() {
  if (committed_) return;
  std::error_code ec;  // best effort: the start's own error is what the user must see
  if (dir_is_new_) {
    fs::remove_all(dir_, ec);
  } else {
    std::vector<fs::path> added;
    for (const fs::path& p : entries_under(dir_)) {
      if (existing_.count(p) == 0) added.push_back(p);
    }
    // Deepest first, so a new folder is empty (of new entries) by the time it is removed; a new
    // folder holds nothing old, so remove_all never touches an entry that existed before.
    for (auto it = added.rbegin(); it != added.rend(); ++it) fs::remove_all(*it, ec);
  }
  // The parents the start made: only where nothing else has been put in them since.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    if (*it != dir_) fs::remove(*it, ec);  // fs::remove fails on a folder that is not empty
  }
}

}  // namespace kiln::io
