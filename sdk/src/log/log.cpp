// Shared sinks for all subsystem loggers: a console sink whose level depends on the rank and,
// once the run directory exists, a per-rank file sink.
#include "kiln/sdk/log.hpp"

#include <spdlog/spdlog.h>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/sdk_internal/log_setup.hpp"

namespace kiln::log {
namespace {

struct State {
  std::mutex mutex;
  std::vector<spdlog::sink_ptr> sinks;
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> console;
  std::string prefix = "[rank 0/1]";
  int rank = 0;
};

State& state() {
  // Intentionally leaked: loggers may be used from static destructors of plugins at exit.
  static State* s = [] {
    auto* st = new State();
    st->console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    st->console->set_level(spdlog::level::info);
    st->sinks.push_back(st->console);
    return st;
  }();
  return *s;
}

spdlog::level::level_enum to_spdlog(Level level) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(level));
}

std::string pattern(const std::string& prefix) {
  return "%H:%M:%S.%e " + prefix + " [%n] %^%l%$: %v";
}

}  // namespace

void configure(const RankInfo& ranks, Level console_level, bool all_ranks) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.rank = ranks.rank;
  s.prefix = "[rank " + std::to_string(ranks.rank) + "/" + std::to_string(ranks.world_size) + "]";
  // The other ranks keep warnings and errors on the console (every rank's own log file has all).
  s.console->set_level(ranks.rank == 0 || all_ranks ? to_spdlog(console_level) : spdlog::level::warn);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) {
    l->set_pattern(pattern(s.prefix));
  });
}

void attach_log_dir(const std::filesystem::path& dir) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create log directory " + dir.string() + ": " + ec.message());
  const auto file = dir / ("rank" + std::to_string(s.rank) + ".log");
  std::shared_ptr<spdlog::sinks::basic_file_sink_mt> sink;
  try {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), /*truncate=*/false);
  } catch (const spdlog::spdlog_ex& e) {
    throw IoError("cannot open log file " + file.string() + ": " + e.what());
  }
  sink->set_level(spdlog::level::trace);
  s.sinks.push_back(sink);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) {
    l->sinks().push_back(sink);
    l->set_pattern(pattern(s.prefix));
  });
}

struct Logger::Impl {
  std::shared_ptr<spdlog::logger> logger;
};

void Logger::write(Level level, std::string_view message) const { impl_->logger->log(to_spdlog(level), message); }
bool Logger::enabled(Level level) const { return impl_->logger->should_log(to_spdlog(level)); }
void Logger::flush() const { impl_->logger->flush(); }

namespace {

std::shared_ptr<spdlog::logger> spdlog_logger(std::string_view subsystem) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const std::string name(subsystem);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, s.sinks.begin(), s.sinks.end());
  logger->set_level(spdlog::level::trace);
  // Every info line and above reaches the file at once: a rank ended by SIGTERM or a crash
  // cannot flush, and its log (a handful of info lines per epoch) is what explains it. Debug and
  // trace lines, which may come per call, stay buffered.
  logger->flush_on(spdlog::level::info);
  logger->set_pattern(pattern(s.prefix));
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace

std::shared_ptr<const Logger> get(std::string_view subsystem) {
  return std::make_shared<const Logger>(std::make_shared<Logger::Impl>(Logger::Impl{spdlog_logger(subsystem)}));
}

Level parse_level(std::string_view name) {
  if (name == "trace") return Level::trace;
  if (name == "debug") return Level::debug;
  if (name == "warn") return Level::warn;
  if (name == "error") return Level::error;
  if (name == "off") return Level::off;
  return Level::info;
}

void flush() {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
}

}  // namespace kiln::log
