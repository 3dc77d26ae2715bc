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

RunDirRollback::RunDirRollback(const fs::path& dir) : dir_(fs::absolute(dir)) {
  std::error_code ec;
  if (fs::exists(dir_, ec)) {
    existing_ = entries_under(dir_);
    return;
  }
  // runs/<stamp> with no runs/ yet: the start creates both, and a failed start removes both.
  created_top_ = dir_;
  for (fs::path up = dir_.parent_path(); !up.empty() && up != up.root_path() && !fs::exists(up, ec);
       up = up.parent_path()) {
    created_top_ = up;
  }
}

RunDirRollback::~RunDirRollback() {
  if (committed_) return;
  std::error_code ec;  // best effort: the start's own error is what the user must see
  if (!created_top_.empty()) {
    fs::remove_all(created_top_, ec);
    return;
  }
  std::vector<fs::path> added;
  for (const fs::path& p : entries_under(dir_)) {
    if (existing_.count(p) == 0) added.push_back(p);
  }
  // Deepest first, so a new folder is empty (of new entries) by the time it is removed; a new
  // folder holds nothing old, so remove_all never touches an entry that existed before.
  for (auto it = added.rbegin(); it != added.rend(); ++it) fs::remove_all(*it, ec);
}

}  // namespace kiln::io
