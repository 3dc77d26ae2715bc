// Rank resolution from launcher environment variables (order in the header).
#include "kiln/launch/ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
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
    // MPICH's Hydra sets MPI_LOCALRANKID and MPI_LOCALNRANKS beside PMI_RANK and PMI_SIZE.
    {Launcher::pmi, "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr},
    {Launcher::slurm, "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
     "SLURM_STEP_ID"},
};

/// The entry for node `node` of a Slurm task count list such as "2(x3),1" (the first three
/// nodes run 2 tasks, the fourth 1): SLURM_STEP_TASKS_PER_NODE's format.
int tasks_on_node(const std::string& list, int node, const std::string& name) {
  const auto bad = [&](const std::string& why) {
    return ConfigError(fmt::format("environment variable {}='{}' {}", name, list, why));
  };
  if (node < 0) throw bad(fmt::format("cannot be read for node {}", node));
  std::int64_t first_node = 0;  // of the current entry
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string entry = list.substr(at, comma - at);
    const std::size_t paren = entry.find("(x");
    const std::string count_text = entry.substr(0, paren);
    int count = 0, repeat = 1;
    const auto c = std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    bool ok = !count_text.empty() && c.ec == std::errc() && c.ptr == count_text.data() + count_text.size();
    if (ok && paren != std::string::npos) {
      const std::string repeat_text = entry.substr(paren + 2, entry.size() - paren - 3);
      const auto r = std::from_chars(repeat_text.data(), repeat_text.data() + repeat_text.size(), repeat);
      ok = entry.back() == ')' && !repeat_text.empty() && r.ec == std::errc() &&
           r.ptr == repeat_text.data() + repeat_text.size() && repeat >= 1;
    }
    if (!ok) throw bad("is not a task count list such as 2(x3),1");
    if (node < first_node + repeat) return count;
    first_node += repeat;
    at = comma + 1;
  }
  throw bad(fmt::format("lists {} nodes; SLURM_NODEID is {}", first_node, node));
}

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
      if (auto ls = env(s.local_size)) {
        r.local_world_size = parse_int(*ls, s.local_size);
      } else if (s.launcher == Launcher::slurm) {
        // SLURM_NTASKS_PER_NODE is set only with --ntasks-per-node; srun always sets the step's
        // per-node counts, one entry per node of the step, read at this node's index.
        const auto counts = env("SLURM_STEP_TASKS_PER_NODE");
        const auto node = env("SLURM_NODEID");
        if (counts && node) {
          r.local_world_size = tasks_on_node(*counts, parse_int(*node, "SLURM_NODEID"), "SLURM_STEP_TASKS_PER_NODE");
        }
      }
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
