// The launch target: the environment a launcher (kiln --nproc, torchrun, Open MPI, PMI, Slurm)
// hands a rank, and the rendezvous address, as each rank reads them before it connects.
//
// Input: lines "NAME=value" make the environment; a line "rendezvous=<spec>" is also given to
// the TCP store's address parser. Names and values end at a NUL byte, as C strings (the
// environment, argv) do; a config's dist.rendezvous cannot hold one either (the config refuses it).
#include <map>

#include "fuzz_target.hpp"
#include "kiln/errors.hpp"
#include "kiln/launch/ranks.hpp"
#include "tcp_spec.hpp"

namespace kiln::fuzz {
namespace {

/// The message must name the variable, the launcher, or the address it is about.
void expect_named_any(const kiln::Error& e, const std::map<std::string, std::string>& env) {
  const std::string_view message = e.what();
  for (const auto& [name, value] : env)
    if (message.find(name) != std::string_view::npos) return;
  for (const char* flag : {"--rank", "(from "})
    if (message.find(flag) != std::string_view::npos) return;
  finding(std::string("the error names none of the variables it came from: ") + e.what());
}

bool run_launch(Input input) {
  std::map<std::string, std::string> env;
  std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    line = line.substr(0, line.find('\0'));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (const std::size_t eq = line.find('='); eq != std::string_view::npos)
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  bool accepted = true;
  try {
    const RankInfo r = launch::resolve_ranks({}, [&](const std::string& name) -> std::optional<std::string> {
      const auto it = env.find(name);
      return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
    if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size || r.local_world_size < 1 || r.local_rank < 0 ||
        r.local_rank >= r.local_world_size)
      finding("resolve_ranks accepted rank " + std::to_string(r.rank) + " of " + std::to_string(r.world_size) +
              ", local " + std::to_string(r.local_rank) + " of " + std::to_string(r.local_world_size));
  } catch (const kiln::ConfigError& e) {
    expect_named_any(e, env);
    accepted = false;
  }
  if (const auto it = env.find("rendezvous"); it != env.end()) {
    try {
      const dist::detail::TcpEndpoint endpoint = dist::detail::parse_tcp_spec(it->second);
      if (endpoint.host.empty() || endpoint.port < 1 || endpoint.port > 65535)
        finding("parse_tcp_spec accepted '" + it->second + "'");
    } catch (const kiln::ConfigError& e) {
      expect_named(e, it->second);
      accepted = false;
    }
  }
  return accepted;
}

std::vector<Bytes> launch_seeds() {
  return {bytes_of("RANK=1\nWORLD_SIZE=4\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\nKILN_LAUNCHER=kiln --nproc\n"
                   "rendezvous=tcp://node01:29500\n"),
          bytes_of("OMPI_COMM_WORLD_RANK=3\nOMPI_COMM_WORLD_SIZE=8\nOMPI_COMM_WORLD_LOCAL_RANK=3\n"
                   "OMPI_COMM_WORLD_LOCAL_SIZE=4\nrendezvous=10.0.0.1:1\n"),
          bytes_of("SLURM_PROCID=0\nSLURM_NTASKS=2\nSLURM_LOCALID=0\nSLURM_NTASKS_PER_NODE=1\nSLURM_STEP_ID=0\n"),
          bytes_of("SLURM_PROCID=5\nSLURM_NTASKS=7\nSLURM_LOCALID=1\nSLURM_STEP_ID=0\nSLURM_NODEID=2\n"
                   "SLURM_STEP_TASKS_PER_NODE=2(x3),1\n"),
          bytes_of("PMI_RANK=5\nPMI_SIZE=6\nMPI_LOCALRANKID=0\nMPI_LOCALNRANKS=2\nTORCHELASTIC_RUN_ID=x\n")};
}

const Target kTargets[] = {
    {"launch", "kiln::launch::resolve_ranks (launcher variables) and the TCP rendezvous address parser",
     run_launch, launch_seeds},
};

}  // namespace

std::span<const Target> launch_targets() { return kTargets; }

}  // namespace kiln::fuzz
