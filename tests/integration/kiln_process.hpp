// Running the real `kiln` binary from a test: in a chosen working directory, with only the build
// tree's plugins (plus any --plugin-path the test passes) visible, capturing stdout, stderr and
// the exit status.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kiln::test {

struct KilnResult {
  int status = -1;
  std::string out, err;
};

/// A fresh directory under the system temp dir for this test process, removed at exit.
const std::filesystem::path& scratch_dir();
/// scratch_dir()/name, empty (emptied if an earlier test case of this process used the name): a
/// test case's working directory.
std::filesystem::path fresh_workdir(const std::string& name);

/// Runs `kiln args...` with `cwd` as its working directory, after the shell command `setup` if
/// one is given (e.g. "ulimit -f 1200"; it applies to kiln, not to the test).
KilnResult run_kiln(const std::filesystem::path& cwd, const std::vector<std::string>& args,
                    const std::string& setup = "");

/// stderr of a failed run must be exactly one line starting "kiln: error: " with exit status 1
/// (each checked with BOOST_TEST); returns that line without the prefix.
std::string one_line_error(const KilnResult& r);

/// A config file in scratch_dir() that trains the mlp (4 -> [4] -> 2) for `epochs` on the fixture
/// data source `data_plugin` (tests/plugin/fixtures: 4 f32 features, 2 classes), batch 4, one
/// loader worker, no progress line.
std::filesystem::path fixture_data_config(const std::string& data_plugin, int epochs = 1);

/// The whole file as a string ("" if it cannot be read).
std::string slurp(const std::filesystem::path& file);

/// Flips one bit inside the first tensor's bytes of a Kiln-written safetensors file (8-byte
/// little-endian header length, the JSON header, then the data): a checkpoint file whose checksum
/// no longer matches.
void damage_safetensors(const std::filesystem::path& file);

/// The build tree's directory of the fixture plugin `name` (tests/plugin/CMakeLists.txt).
std::filesystem::path fixture_dir(const std::string& name);

}  // namespace kiln::test
