// Undoing a failed start: what `kiln train` wrote into its run directory before training began.
//
// Every check that can be made without the run directory is made before it is created
// (run.cpp). A few steps still come after it because they need its files: the metrics writer
// opens metrics.jsonl and the trainer that writes it builds the model and the loaders, loads a
// --resume checkpoint and broadcasts the initial parameters. If one of those fails, the start
// failed and the directory must look as it did before: removed if this start created it, else
// (--resume, or an explicit --run-dir that already existed) only the entries this start added
// are removed, and nothing that was there before is touched.
#pragma once

#include <filesystem>
#include <set>
#include <vector>

namespace kiln::io {

class RunDirRollback {
 public:
  /// Records what exists at and under `dir` now, before anything of the run is written.
  /// `created`: the folders this start already made for it (RunDirClaim::created(), outermost
  /// first, `dir` last when it is new). Without it, a `dir` that does not exist yet and its
  /// missing parents are taken to be the start's to make.
  explicit RunDirRollback(const std::filesystem::path& dir, std::vector<std::filesystem::path> created = {});
  /// Unless commit() was called: removes every file and folder created at or under `dir` since
  /// construction, or `dir` whole where the start made it; then the folders above it that the
  /// start made, where they are empty (another run may have been put beside this one meanwhile:
  /// two starts share a new runs/). Never throws.
  ~RunDirRollback();
  RunDirRollback(const RunDirRollback&) = delete;
  RunDirRollback& operator=(const RunDirRollback&) = delete;

  /// The run has started: keep everything.
  void commit() noexcept { committed_ = true; }

 private:
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> created_;  // folders the start made, outermost first (absolute)
  bool dir_is_new_ = false;                     // dir_ is the last of created_
  std::set<std::filesystem::path> existing_;    // entries under dir_ at construction, when it is not new
  bool committed_ = false;
};

}  // namespace kiln::io
