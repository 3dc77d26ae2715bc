// test_comm_mpi: the shared conformance suite for the `mpi` communicator, one rank per process.
// Run it under mpirun (CTest does: `mpirun -np 2|4 --oversubscribe --allow-run-as-root`); run
// alone it is a world of 1 (an MPI singleton).
//
// Each process hosts its own rank (RankPlacement), builds only that rank's inputs and checks
// only that rank's results; the per-rank counts are then summed over MPI_COMM_WORLD (the test's
// own MPI traffic, apart from the plugin's duplicated communicator), so every process asserts
// the same world-wide #wrong. The barrier case counts arrivals in files of a directory that
// rank 0 creates. It also checks the plugin's MPI start-up rule: by default the plugin starts
// MPI and must finalise it when its communicator goes; with KILN_TEST_MPI_INIT_FIRST=1 this
// program starts MPI first and the plugin must leave it running.
#define BOOST_TEST_MODULE test_comm_mpi
#include <mpi.h>

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comm_conformance.hpp"

namespace kiln::test {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

/// Rank 0's string on every process (MPI_COMM_WORLD).
std::string broadcast_text(const std::string& text, int root) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, root, MPI_COMM_WORLD);
  std::string out = text;
  out.resize(static_cast<std::size_t>(length));
  MPI_Bcast(out.data(), length, MPI_CHAR, root, MPI_COMM_WORLD);
  return out;
}

/// Sums checked/wrong over all processes and keeps the lowest rank's first detail.
void merge_over_world(std::vector<CaseResult>& results, int rank, int world) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return;  // MPI never started (connect failed early): local results stand
  long long counts[2] = {static_cast<long long>(results.size()), -static_cast<long long>(results.size())};
  MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  if (counts[0] != -counts[1]) {
    results.front().detail += fmt::format(" (processes ran different numbers of cases: {} to {})", counts[0], -counts[1]);
    return;  // cannot pair cases up
  }
  for (auto& r : results) {
    long long sums[2] = {r.checked, r.wrong};
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    r.checked = sums[0];
    r.wrong = sums[1];
    int owner = r.detail.empty() ? world : rank;
    MPI_Allreduce(MPI_IN_PLACE, &owner, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (owner < world) r.detail = broadcast_text(r.detail, owner);
  }
}

RankPlacement one_rank_per_process(int rank, int world) {
  RankPlacement p;
  p.world = world;
  p.local = {rank};
  p.run = [rank, world](const std::function<void(int)>& body) {
    std::vector<std::string> errors(static_cast<std::size_t>(world));
    try {
      body(rank);
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(rank)] = std::string(e.what()).empty() ? "<empty message>" : e.what();
    }
    return errors;
  };
  p.from_rank0 = [](const std::vector<double>& mine) {
    std::vector<double> out = mine;
    long long n = static_cast<long long>(out.size());
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    out.resize(static_cast<std::size_t>(n));
    MPI_Bcast(out.data(), static_cast<int>(n), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return out;
  };
  // The arrival directory is made when the barrier case starts (every rank is there, and MPI is
  // up by then): rank 0 creates it and broadcasts its name.
  auto dir = std::make_shared<std::string>();
  p.arrive = [dir, rank](int, int round) {
    if (dir->empty()) {
      std::string made;
      if (rank == 0) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-mpi-barrier-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) != nullptr) made = tmpl;
      }
      *dir = broadcast_text(made, 0);
      if (dir->empty()) throw std::runtime_error("rank 0 could not create the barrier-arrival directory");
    }
    std::ofstream(fmt::format("{}/round{}.rank{}", *dir, round, rank)).put('1');
  };
  p.arrived = [dir, world](int round) {
    int n = 0;
    for (int r = 0; r < world; ++r) n += std::filesystem::exists(fmt::format("{}/round{}.rank{}", *dir, round, r)) ? 1 : 0;
    return n;
  };
  p.merge = [dir, rank, world](std::vector<CaseResult>& results) {
    merge_over_world(results, rank, world);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Barrier(MPI_COMM_WORLD);  // nobody still reads the arrival files
    if (rank == 0 && !dir->empty()) std::filesystem::remove_all(*dir);
  };
  return p;
}

}  // namespace

BOOST_AUTO_TEST_CASE(mpi_world_from_mpirun) {
  const int world = env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1));
  const int rank = env_int("OMPI_COMM_WORLD_RANK", env_int("PMI_RANK", 0));
  const bool init_first = env_int("KILN_TEST_MPI_INIT_FIRST", 0) == 1;
  if (init_first) {
    int provided = 0;
    BOOST_REQUIRE(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) == MPI_SUCCESS);
  }
  const CommSpec spec{"mpi", "", "mpi", {DType::f32, DType::f64, DType::bf16, DType::f16}};
  const auto results = run_conformance(spec, one_rank_per_process(rank, world), nullptr, std::chrono::seconds(120));
  check_results(spec, world, results);

  // The start-up rule: whoever started MPI finalises it, and only they.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (init_first) {
    BOOST_CHECK_MESSAGE(!finalized, "the mpi plugin finalised MPI that this program had started");
    if (!finalized) MPI_Finalize();
  } else {
    BOOST_CHECK_MESSAGE(finalized, "the mpi plugin started MPI but did not finalise it when its communicator was destroyed");
  }
}

}  // namespace kiln::test
