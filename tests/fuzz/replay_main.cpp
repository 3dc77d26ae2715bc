// kiln_fuzz_replay: runs the fuzz targets without libFuzzer, with any compiler. CTest runs it on
// every build (tests/fuzz/CMakeLists.txt), the sanitizer job under ASan and UBSan.
//
//   kiln_fuzz_replay [--target NAME]... [--mutations N] [--list] [--verbose] [--write-seeds DIR] [DIR...]
//
// For each target (all, or those named): its seeds (each must be accepted: a seed that fails
// tests nothing past the first error), N deterministic mutations of each seed (mutate.hpp), and
// every file under DIR/<target>/ for each DIR given (tests/fuzz/regressions holds the inputs
// libFuzzer found, kept so they stay fixed). --write-seeds writes the seeds to DIR/<target>/ as
// libFuzzer's starting corpus (scripts/fuzz.sh) and runs nothing. --verbose prints the message of
// every rejected input.
//
// On a finding or a crash, the input is written to kiln-fuzz-failing-input in the current
// directory and its origin printed, so it can be run again: kiln_fuzz_replay --target T --mutations 0 <dir>.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "mutate.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define KILN_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_FUZZ_ASAN 1
#endif
#endif
#ifdef KILN_FUZZ_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace fs = std::filesystem;
using kiln::fuzz::Bytes;
using kiln::fuzz::Target;

namespace {

// The input being run, for the crash path (read from a signal handler: plain globals).
const std::uint8_t* g_input = nullptr;
std::size_t g_input_size = 0;
char g_origin[512] = "";

void save_failing_input() {
  static const char kMessage[] = "kiln-fuzz: the failing input is in ./kiln-fuzz-failing-input; it was ";
  const int fd = ::open("kiln-fuzz-failing-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    std::size_t done = 0;
    while (done < g_input_size) {
      const ssize_t n = ::write(fd, g_input + done, g_input_size - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }
  (void)!::write(2, kMessage, sizeof kMessage - 1);
  (void)!::write(2, g_origin, std::strlen(g_origin));
  (void)!::write(2, "\n", 1);
}

void on_fatal_signal(int sig) {
  save_failing_input();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_crash_reporting() {
#ifdef KILN_FUZZ_ASAN
  __sanitizer_set_death_callback(save_failing_input);
#endif
  for (const int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, on_fatal_signal);
}

struct Tally {
  std::size_t runs = 0, accepted = 0;
};

bool run_one(const Target& target, const Bytes& input, const std::string& origin, Tally& tally) {
  g_input = input.data();
  g_input_size = input.size();
  std::snprintf(g_origin, sizeof g_origin, "%s", origin.c_str());
  const bool accepted = target.run(input);
  ++tally.runs;
  tally.accepted += accepted ? 1 : 0;
  return accepted;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "kiln_fuzz_replay: %s\nusage: kiln_fuzz_replay [--target NAME]... [--mutations N] [--list] "
               "[--verbose] [--write-seeds DIR] [DIR...]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> only, dirs;
  std::uint64_t mutations = 200;
  std::string seeds_dir;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--target" || arg == "--mutations" || arg == "--write-seeds") && i + 1 == argc)
      return usage((arg + " needs a value").c_str());
    if (arg == "--target") only.push_back(argv[++i]);
    else if (arg == "--mutations") {
      const std::string_view n = argv[++i];
      const auto r = std::from_chars(n.data(), n.data() + n.size(), mutations);
      if (r.ec != std::errc() || r.ptr != n.data() + n.size()) return usage("--mutations needs a whole number");
    }
    else if (arg == "--write-seeds") seeds_dir = argv[++i];
    else if (arg == "--list") list = true;
    else if (arg == "--verbose") kiln::fuzz::set_verbose(true);
    else if (arg.starts_with("--")) return usage(("unknown option " + arg).c_str());
    else dirs.push_back(arg);
  }
  std::vector<const Target*> targets;
  for (const Target& t : kiln::fuzz::all_targets())
    if (only.empty() || std::find(only.begin(), only.end(), t.name) != only.end()) targets.push_back(&t);
  if (targets.size() < std::max<std::size_t>(only.size(), 1)) return usage("unknown target name (see --list)");

  if (list) {
    for (const Target* t : targets) std::printf("%-14.*s %.*s\n", int(t->name.size()), t->name.data(),
                                                int(t->parses.size()), t->parses.data());
    return 0;
  }
  if (!seeds_dir.empty()) {
    for (const Target* t : targets) {
      const fs::path dir = fs::path(seeds_dir) / std::string(t->name);
      fs::create_directories(dir);
      const std::vector<Bytes> seeds = t->seeds();
      for (std::size_t i = 0; i < seeds.size(); ++i)
        kiln::fuzz::write_bytes((dir / ("seed-" + std::to_string(i))).string(), seeds[i]);
    }
    return 0;
  }

  install_crash_reporting();
  int failures = 0;
  for (const Target* t : targets) {
    const auto start = std::chrono::steady_clock::now();
    const std::string name(t->name);
    Tally seeds_tally, mutation_tally, file_tally;
    const std::vector<Bytes> seeds = t->seeds();
    for (std::size_t s = 0; s < seeds.size(); ++s) {
      const std::string origin = name + " seed " + std::to_string(s);
      if (!run_one(*t, seeds[s], origin, seeds_tally)) {
        std::fprintf(stderr, "kiln_fuzz_replay: %s is not accepted (a seed must parse)\n", origin.c_str());
        ++failures;
      }
      for (std::uint64_t k = 0; k < mutations; ++k)
        run_one(*t, kiln::fuzz::mutate(seeds[s], origin, k), origin + " mutation " + std::to_string(k), mutation_tally);
    }
    for (const std::string& dir : dirs) {
      const fs::path target_dir = fs::path(dir) / name;
      if (!fs::is_directory(target_dir)) continue;
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(target_dir))
        if (entry.is_regular_file()) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const fs::path& file : files) run_one(*t, kiln::fuzz::read_bytes(file.string()), file.string(), file_tally);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-14s %zu seeds, %zu mutations (%zu accepted), %zu files (%zu accepted): no finding, %.2f s\n",
                name.c_str(), seeds_tally.runs, mutation_tally.runs, mutation_tally.accepted, file_tally.runs,
                file_tally.accepted, seconds);
  }
  return failures == 0 ? 0 : 1;
}
