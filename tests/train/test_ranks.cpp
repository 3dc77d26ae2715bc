// kiln::launch::resolve_ranks with an injected environment: each launcher's variables, the
// precedence explicit -> torchrun-style (kiln --nproc / torchrun / by hand) -> Open MPI -> PMI ->
// Slurm (only under srun) -> default, and
// the ConfigError text for values that are not integers or not a valid rank.
#include <boost/test/unit_test.hpp>

#include <map>
#include <string>

#include "kiln/errors.hpp"
#include "kiln/launch/ranks.hpp"
#include "../nn/nn_fixture.hpp"

namespace {

using Env = std::map<std::string, std::string>;
using kiln::launch::ExplicitRanks;

kiln::launch::EnvLookup lookup(const Env& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

kiln::RankInfo resolve(const Env& env, ExplicitRanks ex = {}) { return kiln::launch::resolve_ranks(ex, lookup(env)); }

std::string error(const Env& env, ExplicitRanks ex = {}) {
  return kiln::test::error_text<kiln::ConfigError>([&] { resolve(env, ex); });
}

void expect(const kiln::RankInfo& r, int rank, int world, int local_rank, int local_world, const std::string& source) {
  BOOST_TEST(r.rank == rank);
  BOOST_TEST(r.world_size == world);
  BOOST_TEST(r.local_rank == local_rank);
  BOOST_TEST(r.local_world_size == local_world);
  BOOST_TEST(r.source == source);
}

const Env kTorchrun = {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                       {"TORCHELASTIC_RUN_ID", "none"}};
const Env kOmpi = {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "6"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}};
const Env kPmi = {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}};
const Env kSlurm = {{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"},
                    {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_STEP_ID", "0"}};

Env merged(std::initializer_list<Env> envs) {
  Env out;
  for (const auto& e : envs) out.insert(e.begin(), e.end());
  return out;
}

BOOST_AUTO_TEST_CASE(default_is_rank_0_of_1) {
  expect(resolve({}), 0, 1, 0, 1, "default (no launcher variables)");
}

BOOST_AUTO_TEST_CASE(explicit_ranks) {
  expect(resolve({}, {1, 4}), 1, 4, 1, 4, "command line");
  expect(resolve({{"KILN_LOCAL_RANK", "0"}, {"KILN_LOCAL_WORLD_SIZE", "2"}}, {3, 4}), 3, 4, 0, 2, "command line");
  BOOST_TEST(error({}, {1, std::nullopt}) == "--rank and --world-size must be given together");
  BOOST_TEST(error({}, {std::nullopt, 2}) == "--rank and --world-size must be given together");
  BOOST_TEST(error({}, {4, 4}) == "rank 4 of world size 4 (from command line) is not a valid rank");
  BOOST_TEST(error({}, {-1, 4}) == "rank -1 of world size 4 (from command line) is not a valid rank");
}

BOOST_AUTO_TEST_CASE(each_launcher) {
  expect(resolve(kTorchrun), 5, 8, 1, 4, "torchrun (RANK, WORLD_SIZE)");
  expect(resolve(kOmpi), 3, 6, 0, 3, "openmpi (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)");
  expect(resolve(kPmi), 2, 4, 1, 4, "pmi (PMI_RANK, PMI_SIZE)");  // PMI has no local size: world
  expect(resolve(kSlurm), 7, 16, 3, 4, "slurm (SLURM_PROCID, SLURM_NTASKS)");
  // Without the local variables, local = global.
  expect(resolve({{"RANK", "2"}, {"WORLD_SIZE", "3"}}), 2, 3, 2, 3, "environment (RANK, WORLD_SIZE)");
}

// The same RANK/WORLD_SIZE variables come from three launchers; the banner names the right one.
BOOST_AUTO_TEST_CASE(who_set_the_torchrun_variables) {
  using kiln::launch::Launcher;
  const Env by_hand = {{"RANK", "1"}, {"WORLD_SIZE", "2"}};
  const Env nproc = merged({by_hand, {{"KILN_LAUNCHER", "kiln --nproc"}}});
  expect(resolve(nproc), 1, 2, 1, 2, "kiln --nproc (RANK, WORLD_SIZE)");
  BOOST_TEST((kiln::launch::detect_launcher({}, lookup(nproc)) == Launcher::kiln_nproc));
  BOOST_TEST((kiln::launch::detect_launcher({}, lookup(kTorchrun)) == Launcher::torchrun));
  BOOST_TEST((kiln::launch::detect_launcher({}, lookup(by_hand)) == Launcher::environment));
  BOOST_TEST((kiln::launch::detect_launcher({}, lookup(kOmpi)) == Launcher::openmpi));
  BOOST_TEST((kiln::launch::detect_launcher({}, lookup(kSlurm)) == Launcher::slurm));
  BOOST_TEST((kiln::launch::detect_launcher({1, 2}, lookup(kTorchrun)) == Launcher::command_line));
  BOOST_TEST((kiln::launch::detect_launcher({}, lookup({})) == Launcher::none));
  // Any other KILN_LAUNCHER value is not the supervisor's mark.
  expect(resolve(merged({by_hand, {{"KILN_LAUNCHER", "x"}}})), 1, 2, 1, 2, "environment (RANK, WORLD_SIZE)");
}

BOOST_AUTO_TEST_CASE(slurm_only_under_srun) {
  Env salloc = kSlurm;
  salloc.erase("SLURM_STEP_ID");  // an sbatch/salloc shell: SLURM_* describe the allocation
  expect(resolve(salloc), 0, 1, 0, 1, "default (no launcher variables)");
}

// Without --ntasks-per-node, srun sets no SLURM_NTASKS_PER_NODE; the local size then comes from
// the step's per-node counts at this node's index (conventions.md, the launcher table).
BOOST_AUTO_TEST_CASE(slurm_local_size_from_the_step_tasks_per_node) {
  Env srun = kSlurm;
  srun.erase("SLURM_NTASKS_PER_NODE");
  srun["SLURM_NTASKS"] = "7";
  srun["SLURM_PROCID"] = "6";
  srun["SLURM_LOCALID"] = "0";
  srun["SLURM_STEP_TASKS_PER_NODE"] = "2(x3),1";
  srun["SLURM_NODEID"] = "3";
  expect(resolve(srun), 6, 7, 0, 1, "slurm (SLURM_PROCID, SLURM_NTASKS)");
  srun["SLURM_NODEID"] = "2";
  srun["SLURM_LOCALID"] = "1";
  srun["SLURM_PROCID"] = "5";
  expect(resolve(srun), 5, 7, 1, 2, "slurm (SLURM_PROCID, SLURM_NTASKS)");
  // --ntasks-per-node, when given, is the figure used.
  srun["SLURM_NTASKS_PER_NODE"] = "4";
  expect(resolve(srun), 5, 7, 1, 4, "slurm (SLURM_PROCID, SLURM_NTASKS)");
  srun.erase("SLURM_NTASKS_PER_NODE");
  srun["SLURM_STEP_TASKS_PER_NODE"] = "2(x2";
  BOOST_TEST(error(srun) == "environment variable SLURM_STEP_TASKS_PER_NODE='2(x2' is not a task count list such "
                            "as 2(x3),1");
  srun["SLURM_STEP_TASKS_PER_NODE"] = "2,2";
  srun["SLURM_NODEID"] = "5";
  BOOST_TEST(error(srun) == "environment variable SLURM_STEP_TASKS_PER_NODE='2,2' lists 2 nodes; SLURM_NODEID is 5");
}

BOOST_AUTO_TEST_CASE(pmi_local_size_from_hydra) {
  expect(resolve(merged({kPmi, {{"MPI_LOCALNRANKS", "2"}}})), 2, 4, 1, 2, "pmi (PMI_RANK, PMI_SIZE)");
}

BOOST_AUTO_TEST_CASE(a_source_needs_both_rank_and_size) {
  expect(resolve({{"RANK", "1"}}), 0, 1, 0, 1, "default (no launcher variables)");
  expect(resolve(merged({{{"RANK", "1"}}, kPmi})), 2, 4, 1, 4, "pmi (PMI_RANK, PMI_SIZE)");
}

BOOST_AUTO_TEST_CASE(precedence_order) {
  const Env all = merged({kTorchrun, kOmpi, kPmi, kSlurm});
  BOOST_TEST(resolve(all, {0, 2}).source == "command line");
  BOOST_TEST(resolve(all).source == "torchrun (RANK, WORLD_SIZE)");
  BOOST_TEST(resolve(merged({kOmpi, kPmi, kSlurm})).source == "openmpi (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)");
  BOOST_TEST(resolve(merged({kPmi, kSlurm})).source == "pmi (PMI_RANK, PMI_SIZE)");
}

BOOST_AUTO_TEST_CASE(bad_values_are_config_errors) {
  BOOST_TEST(error({{"RANK", "one"}, {"WORLD_SIZE", "2"}}) == "environment variable RANK='one' is not an integer");
  BOOST_TEST(error({{"RANK", "1"}, {"WORLD_SIZE", "2x"}}) == "environment variable WORLD_SIZE='2x' is not an integer");
  BOOST_TEST(error({{"RANK", ""}, {"WORLD_SIZE", "2"}}) == "environment variable RANK='' is not an integer");
  BOOST_TEST(error({{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}}) ==
             "rank 4 of world size 4 (from pmi (PMI_RANK, PMI_SIZE)) is not a valid rank");
  BOOST_TEST(error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}) ==
             "rank 0 of world size 0 (from environment (RANK, WORLD_SIZE)) is not a valid rank");
  BOOST_TEST(error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "x"}}) ==
             "environment variable OMPI_COMM_WORLD_LOCAL_RANK='x' is not an integer");
  BOOST_TEST(error({{"KILN_LOCAL_RANK", "z"}}, {0, 2}) == "environment variable KILN_LOCAL_RANK='z' is not an integer");
  BOOST_TEST(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-1"}}) ==
             "local rank -1 of 2 (from environment (RANK, WORLD_SIZE)) is not valid");
}

}  // namespace
