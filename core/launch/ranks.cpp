// Rank resolution from launcher environment variables (order in the header).
#include "kiln/launch/ranks.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "kiln/errors.hpp"

namespace kiln::launch {
namespace {

int parse_int(const std::string& text, const std::string& name) {
  int v = 0;
  const auto* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end) {
    throw ConfigError(fmt::format("environment variable {}='{}' is not an integer", name, text));
  }
  return v;
}

struct Source {
  Launcher launcher;
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* required;  // an extra variable that must be set for the source to apply
};

constexpr Source kSources[] = {
    // The name of this first source is refined by torchrun_style_name(): the same variables are
    // set by `kiln --nproc`, by torchrun and by hand.
    {Launcher::torchrun, "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", nullptr},
    {Launcher::openmpi, "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
    {Launcher::pmi, "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", nullptr, nullptr},
    {Launcher::slurm, "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
     "SLURM_STEP_ID"},
};

void check(const RankInfo& r) {
  if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size) {
    throw ConfigError(fmt::format("rank {} of world size {} (from {}) is not a valid rank", r.rank,
                                  r.world_size, r.source));
  }
  if (r.local_world_size < 1 || r.local_rank < 0 || r.local_rank >= r.local_world_size) {
    throw ConfigError(fmt::format("local rank {} of {} (from {}) is not valid", r.local_rank,
                                  r.local_world_size, r.source));
  }
}

/// Who set RANK/WORLD_SIZE: the --nproc supervisor marks its ranks with KILN_LAUNCHER, torchrun
/// (its elastic agent) always sets TORCHELASTIC_RUN_ID; anything else set them by hand.
Launcher torchrun_style(const EnvLookup& env) {
  if (const auto l = env("KILN_LAUNCHER"); l && *l == kKilnNprocLauncher) return Launcher::kiln_nproc;
  if (env("TORCHELASTIC_RUN_ID")) return Launcher::torchrun;
  return Launcher::environment;
}

const Source* find_source(const EnvLookup& env) {
  for (const Source& s : kSources) {
    if (!env(s.rank) || !env(s.size)) continue;
    if (s.required && !env(s.required)) continue;
    return &s;
  }
  return nullptr;
}

}  // namespace

const char* launcher_name(Launcher l) {
  switch (l) {
    case Launcher::none: return "default";
    case Launcher::command_line: return "command line";
    case Launcher::kiln_nproc: return "kiln --nproc";
    case Launcher::torchrun: return "torchrun";
    case Launcher::environment: return "environment";
    case Launcher::openmpi: return "openmpi";
    case Launcher::pmi: return "pmi";
    case Launcher::slurm: return "slurm";
  }
  return "unknown";
}

Launcher detect_launcher(const ExplicitRanks& ex, const EnvLookup& env) {
  if (ex.rank || ex.world_size) return Launcher::command_line;
  const Source* s = find_source(env);
  if (!s) return Launcher::none;
  return s->launcher == Launcher::torchrun ? torchrun_style(env) : s->launcher;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

RankInfo resolve_ranks(const ExplicitRanks& ex, const EnvLookup& env) {
  RankInfo r;
  if (ex.rank || ex.world_size) {
    if (!ex.rank || !ex.world_size) throw ConfigError("--rank and --world-size must be given together");
    r.rank = *ex.rank;
    r.world_size = *ex.world_size;
    r.local_rank = r.rank;
    r.local_world_size = r.world_size;
    if (auto lr = env("KILN_LOCAL_RANK")) r.local_rank = parse_int(*lr, "KILN_LOCAL_RANK");
    if (auto ls = env("KILN_LOCAL_WORLD_SIZE")) r.local_world_size = parse_int(*ls, "KILN_LOCAL_WORLD_SIZE");
    r.source = "command line";
    check(r);
    return r;
  }
  if (const Source* found = find_source(env)) {
    const Source& s = *found;
    auto rank = env(s.rank);
    auto size = env(s.size);
    r.rank = parse_int(*rank, s.rank);
    r.world_size = parse_int(*size, s.size);
    r.local_rank = r.rank;
    r.local_world_size = r.world_size;
    if (auto lr = env(s.local_rank)) r.local_rank = parse_int(*lr, s.local_rank);
    if (s.local_size) {
      if (auto ls = env(s.local_size)) r.local_world_size = parse_int(*ls, s.local_size);
    }
    const char* name = s.launcher == Launcher::torchrun ? launcher_name(torchrun_style(env)) : s.name;
    r.source = fmt::format("{} ({}, {})", name, s.rank, s.size);
    check(r);
    return r;
  }
  r.source = "default (no launcher variables)";
  return r;
}

}  // namespace kiln::launch
