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

namespace kiln::io {

class RunDirRollback {
 public:
  /// Records what exists at and under `dir` now, before anything of the run is written.
  explicit RunDirRollback(const std::filesystem::path& dir);
  /// Unless commit() was called: removes every file and folder created at or under `dir` since
  /// construction (with the folders above it that did not exist either). Never throws.
  ~RunDirRollback();
  RunDirRollback(const RunDirRollback&) = delete;
  RunDirRollback& operator=(const RunDirRollback&) = delete;

  /// The run has started: keep everything.
  void commit() noexcept { committed_ = true; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path created_top_;        // highest missing folder on the way to dir_, if any
  std::set<std::filesystem::path> existing_;  // entries under dir_ at construction
  bool committed_ = false;
};

}  // namespace kiln::io
