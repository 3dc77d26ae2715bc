// Host-side control of the logging sinks that live in libkiln_sdk: the core calls these once it
// knows the ranks and the run directory. Not installed: plugins only log (kiln/sdk/log.hpp).
#pragma once

#include <filesystem>

#include "kiln/communicator.hpp"
#include "kiln/sdk/log.hpp"

namespace kiln::log {

/// Sets the rank prefix and console levels. Safe to call again (e.g. once ranks are known).
void configure(const RankInfo& ranks, Level console_level = Level::info, bool all_ranks = false);
/// Adds <dir>/rank<N>.log as a sink of every logger, present and future. Throws IoError.
void attach_log_dir(const std::filesystem::path& dir);
/// Parses "trace" | "debug" | "info" | "warn" | "error" | "off"; anything else is info.
Level parse_level(std::string_view name);
/// Flushes every logger (call before exit).
void flush();

}  // namespace kiln::log
