// See kiln_process.hpp.
#include "kiln_process.hpp"

#include <boost/test/unit_test.hpp>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kiln::test {
namespace fs = std::filesystem;

namespace {

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

const fs::path& scratch_dir() {
  static const struct Scratch {
    fs::path path = fs::temp_directory_path() / fmt::format("kiln-test-{}", ::getpid());
    Scratch() {
      fs::remove_all(path);
      fs::create_directories(path);
    }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } s;
  return s.path;
}

fs::path fresh_workdir(const std::string& name) {
  const fs::path dir = scratch_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

fs::path fixture_data_config(const std::string& data_plugin, int epochs) {
  const fs::path file = scratch_dir() / fmt::format("{}-{}-epochs.toml", data_plugin, epochs);
  std::ofstream(file) << "[run]\nepochs = " << epochs
                      << "\n\n"
                         "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"mlp\"\nin_features = 4\nhidden = [4]\nnum_classes = 2\n\n"
                         "[data.train]\ntype = \""
                      << data_plugin
                      << "\"\n\n"
                         "[loader]\nbatch = 4\nworkers = 1\n\n"
                         "[log]\nprogress = \"never\"\n";
  return file;
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void damage_safetensors(const fs::path& file) {
  std::string bytes = slurp(file);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  bytes[8 + header + 5] ^= 0x01;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

KilnResult run_kiln(const fs::path& cwd, const std::vector<std::string>& args, const std::string& setup) {
  static int counter = 0;
  const fs::path out = scratch_dir() / fmt::format("stdout{}", counter);
  const fs::path err = scratch_dir() / fmt::format("stderr{}", counter++);
  std::string cmd = fmt::format("cd {} && {}env -u KILN_PLUGIN_PATH {}", quote(cwd.string()),
                                setup.empty() ? "" : setup + " && ", quote(std::string(KILN_BINARY_DIR) + "/bin/kiln"));
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += fmt::format(" >{} 2>{}", quote(out.string()), quote(err.string()));
  const int raw = std::system(cmd.c_str());
  KilnResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string one_line_error(const KilnResult& r) {
  BOOST_TEST(r.status == 1, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(r.err.rfind("kiln: error: ", 0) == 0u, "stderr: " << r.err);
  BOOST_TEST((!r.err.empty() && r.err.find('\n') == r.err.size() - 1), "not one line: " << r.err);
  const std::string line = r.err.substr(0, r.err.find('\n'));
  return line.size() >= 13 ? line.substr(13) : line;
}

fs::path fixture_dir(const std::string& name) {
  return fs::path(KILN_BINARY_DIR) / "tests" / "plugin" / "fixtures" / name;
}

}  // namespace kiln::test
