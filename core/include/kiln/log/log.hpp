// Logging: one spdlog logger per subsystem ("train", "loader", "plugin", "cpu"), rank-prefixed.
//
// Rank 0 prints info and above on the console; other ranks print warnings and errors only (so
// logs are not duplicated W times, yet no rank's failure is hidden). Every rank also writes all
// levels to <run_dir>/logs/rank<N>.log once attach_run_dir() is called. Plugins log through
// kiln::log::get("<plugin name>") so their lines carry the same prefix and land in the same file.
#pragma once

#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <string_view>

#include "kiln/communicator.hpp"

namespace kiln::log {

/// Sets the rank prefix and console levels. Safe to call again (e.g. once ranks are known).
void configure(const RankInfo& ranks, spdlog::level::level_enum console_level = spdlog::level::info);
/// Adds <dir>/rank<N>.log as a sink of every logger, present and future. Throws IoError.
void attach_log_dir(const std::filesystem::path& dir);
/// The logger for `subsystem`, created on first use with the current sinks. Thread-safe.
std::shared_ptr<spdlog::logger> get(std::string_view subsystem);
/// Flushes every logger (call before exit).
void flush();

}  // namespace kiln::log
