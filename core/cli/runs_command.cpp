// `kiln runs` (see runs_command.hpp).
#include "runs_command.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/host_name.hpp"
#include "kiln/io/json.hpp"
#include "kiln/io/run_status.hpp"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

constexpr std::string_view kNoStatus = "no status.json (a run from before it, or one that never started)";

struct RunRow {
  fs::path dir;
  std::optional<io::RunStatus> status;
  std::string state;  ///< status.state, "ended?" for a running one whose process is gone, "-" without a status.json
  std::string model, data;
  double when = 0;  ///< status.updated, else the directory's modification time (Unix seconds)
};

/// "resnet" and "imagenet" from the run's config.toml ("?" where it does not say).
void read_plugins(RunRow& row) {
  try {
    const config::Config cfg = config::Config::load(row.dir / "config.toml", {});
    row.model = cfg.plugin_type("model", "?");
    row.data = cfg.plugin_type("data.train", "?");
  } catch (const std::exception&) {
    row.model = row.data = "?";
  }
}

/// A "running" status whose process is gone (on this host: no such pid) ended without a word
/// (SIGKILL, the OOM killer, a crash): shown as "ended?" rather than as running.
std::string shown_state(const io::RunStatus& s) {
  if (s.state != "running" || s.host != io::host_name() || s.pid <= 0) return s.state;
  if (s.pid > std::numeric_limits<pid_t>::max()) return "ended?";  // no process has it (a cast would make it another)
  if (::kill(static_cast<pid_t>(s.pid), 0) == 0 || errno == EPERM) return s.state;
  return "ended?";
}

double modification_time(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

std::string local_time(double unix_seconds) {
  // Up to the year 9999; a hand-edited 1e300 would overflow time_t.
  if (!(unix_seconds > 0 && unix_seconds < 253402300800.0)) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &tm);
  return text;
}

std::vector<RunRow> find_runs(const fs::path& root) {
  std::vector<RunRow> rows;
  std::error_code list_error;  // only the listing's own: a folder without config.toml is no error
  for (fs::directory_iterator it(root, list_error), end; !list_error && it != end; it.increment(list_error)) {
    std::error_code ec;
    if (!it->is_directory(ec) || !fs::is_regular_file(it->path() / "config.toml", ec)) continue;
    RunRow row;
    row.dir = it->path();
    row.status = io::read_run_status(row.dir);
    row.state = row.status ? shown_state(*row.status) : "-";
    row.when = row.status ? row.status->updated : modification_time(row.dir);
    read_plugins(row);
    rows.push_back(std::move(row));
  }
  if (list_error) throw IoError(fmt::format("cannot list {}: {}", root.string(), list_error.message()));
  // Oldest first, as `ls -tr`: the latest run is the last line, next to the prompt.
  std::sort(rows.begin(), rows.end(), [](const RunRow& a, const RunRow& b) {
    return a.when != b.when ? a.when < b.when : a.dir < b.dir;
  });
  return rows;
}

/// `text` for one table cell: control characters (a newline, a terminal escape in a message)
/// as spaces, and at most `limit` characters, cut between UTF-8 sequences, never inside one.
std::string cell_text(std::string text, std::size_t limit = std::string::npos) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (text.size() > limit) {
    std::size_t cut = limit - 3;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
    text.resize(cut);
    text.append("...");
  }
  return text;
}

/// Columns a cell takes: one per UTF-8 character (its first byte), not per byte.
std::size_t display_width(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

void print_table(const std::vector<RunRow>& rows, std::ostream& out) {
  std::vector<std::vector<std::string>> cells = {{"RUN", "STATE", "EPOCH", "TEST ACC", "MODEL", "DATA", "UPDATED", "NOTE"}};
  for (const RunRow& r : rows) {
    const io::RunStatus* s = r.status ? &*r.status : nullptr;
    const std::string note = cell_text(s ? s->message : std::string(kNoStatus), 100);
    cells.push_back({cell_text(r.dir.filename().string()), cell_text(r.state),
                     s ? fmt::format("{}/{}", s->epoch, s->epochs) : "-",
                     s && s->final_test_accuracy ? fmt::format("{:.4f}", *s->final_test_accuracy) : "-",
                     cell_text(r.model), cell_text(r.data), local_time(r.when), note});
  }
  std::vector<std::size_t> width(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], display_width(row[c]));
  }
  for (const auto& row : cells) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(width[c] - display_width(row[c]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

void print_json(const std::vector<RunRow>& rows, std::ostream& out) {
  out << "[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RunRow& r = rows[i];
    out << (i ? ",\n " : "") << "{\"run_dir\": " << io::json_quoted(r.dir.string())
        << ", \"state\": " << io::json_quoted(r.state) << ", \"model\": " << io::json_quoted(r.model)
        << ", \"data\": " << io::json_quoted(r.data)
        << ", \"status\": " << (r.status ? io::run_status_json(*r.status) : "null") << "}";
  }
  out << "]\n";
}

}  // namespace

int run_runs_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description opts("kiln runs options");
  std::string dir = "runs";
  bool json = false;
  opts.add_options()
      ("help,h", "show this help")
      ("dir", po::value(&dir), "the folder that holds the run directories (default runs)")
      ("json", po::bool_switch(&json), "one JSON object per run: its directory, state, model, data and status.json");
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).positional(positional).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln runs [DIR] [--json]\n\n"
           "Lists the run directories in DIR (default runs/), oldest first: how each stands (its status.json:\n"
           "running, completed, stopped_early, failed, interrupted; ended? for a running one whose process\n"
           "is gone from this host), epochs done, final test accuracy, model, data and why it ended\n"
           "(docs/metrics.md#statusjson).\n\n"
        << opts;
    return 0;
  }
  po::notify(vm);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError(fmt::format("{}: no such directory (kiln runs lists the run directories inside one, by "
                                  "default runs/)",
                                  dir));
  }
  const std::vector<RunRow> rows = find_runs(dir);
  if (json) {
    print_json(rows, out);
  } else if (rows.empty()) {
    out << "no run directories in " << dir << " (a run directory holds a config.toml)\n";
  } else {
    print_table(rows, out);
  }
  return 0;
}

}  // namespace kiln::cli
