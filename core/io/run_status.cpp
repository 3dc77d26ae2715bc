// status.json of a run directory (see the header).
#include "kiln/io/run_status.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "kiln/errors.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/host_name.hpp"
#include "kiln/io/json.hpp"

namespace kiln::io {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const JsonValue* member(const JsonValue& object, std::string_view key) {
  for (const JsonMember& m : object.object) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

}  // namespace

RunStatus run_status_now(std::string state, std::int64_t epoch, std::int64_t epochs, std::int64_t step) {
  RunStatus s;
  s.state = std::move(state);
  s.epoch = epoch;
  s.epochs = epochs;
  s.step = step;
  s.pid = static_cast<std::int64_t>(::getpid());
  s.host = host_name();
  s.started = unix_now();
  s.updated = s.started;
  return s;
}

std::string run_status_json(const RunStatus& s) {
  // Times with microseconds, as metrics.jsonl's wall_time; the accuracy with every digit.
  return fmt::format("{{\"state\": {}, \"epoch\": {}, \"epochs\": {}, \"step\": {}, \"message\": {}, "
                     "\"final_test_accuracy\": {}, \"pid\": {}, \"host\": {}, \"started\": {:.6f}, \"updated\": {:.6f}}}",
                     json_quoted(s.state), s.epoch, s.epochs, s.step, json_quoted(s.message),
                     s.final_test_accuracy ? fmt::format("{:.17g}", *s.final_test_accuracy) : "null", s.pid,
                     json_quoted(s.host), s.started, s.updated);
}

void write_run_status(const std::filesystem::path& run_dir, RunStatus status) {
  status.updated = unix_now();
  write_file_atomic(run_dir / "status.json", run_status_json(status) + "\n");
}

RunStatusFile::RunStatusFile(std::filesystem::path run_dir, RunStatus initial)
    : run_dir_(std::move(run_dir)), status_(std::move(initial)) {}

void RunStatusFile::update(const std::function<void(RunStatus&)>& change) {
  const std::lock_guard lock(mutex_);
  change(status_);
  write_run_status(run_dir_, status_);
}

std::string RunStatusFile::update_or_say_why(const std::function<void(RunStatus&)>& change) noexcept {
  try {
    update(change);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::optional<RunStatus> read_run_status(const std::filesystem::path& run_dir) {
  // Only a regular file: opening a named pipe put there would wait for a writer forever.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(run_dir / "status.json", ec)) return std::nullopt;
  std::ifstream in(run_dir / "status.json", std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const JsonValue doc = parse_json(text.str(), (run_dir / "status.json").string());
    if (doc.kind != JsonValue::Kind::object) return std::nullopt;
    const auto str = [&](std::string_view key) {
      const JsonValue* v = member(doc, key);
      if (v == nullptr || v->kind != JsonValue::Kind::string) throw DataError(fmt::format("no string {}", key));
      return v->text;
    };
    const auto number = [&](std::string_view key) {
      const JsonValue* v = member(doc, key);
      if (v == nullptr || v->kind != JsonValue::Kind::number) throw DataError(fmt::format("no number {}", key));
      return std::stod(v->text);  // out of a double's range: std::out_of_range, caught below
    };
    // Counts as exact non-negative integers that fit (as_uint refuses fractions and signs): a
    // hand-edited 1e300 must not reach an integer conversion.
    const auto count = [&](std::string_view key) {
      const JsonValue* v = member(doc, key);
      if (v == nullptr) throw DataError(fmt::format("no {}", key));
      const std::uint64_t n = v->as_uint(std::string(key));
      if (n > static_cast<std::uint64_t>(INT64_MAX)) throw DataError(fmt::format("{} out of range", key));
      return static_cast<std::int64_t>(n);
    };
    RunStatus s;
    s.state = str("state");
    s.epoch = count("epoch");
    s.epochs = count("epochs");
    s.step = count("step");
    s.message = str("message");
    if (const JsonValue* acc = member(doc, "final_test_accuracy"); acc && acc->kind == JsonValue::Kind::number) {
      s.final_test_accuracy = std::stod(acc->text);
    }
    s.pid = count("pid");
    s.host = str("host");
    s.started = number("started");
    s.updated = number("updated");
    return s;
  } catch (const std::exception&) {
    return std::nullopt;  // someone else's file, or damaged: the supervisor leaves it alone
  }
}

}  // namespace kiln::io
