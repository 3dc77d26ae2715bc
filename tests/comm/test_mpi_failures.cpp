// test_comm_mpi_failures: the `mpi` communicator's failure paths, under `mpirun -np 2`.
//
// Rank 1 holds back its all_reduce, so rank 0's times out: the CommError must name the op, its
// number, dtype x count, the rank and the timeout, and a later collective must fail at once,
// quoting the first failure. Rank 0 then tells rank 1 (MPI_Send on MPI_COMM_WORLD, while its
// plugin thread is still inside the stuck collective: this program starts MPI at
// MPI_THREAD_MULTIPLE, as the mpi rendezvous does), and rank 1's late all_reduce completes the
// stuck one, so both can finalise. Also: a communicator whose ranks are not MPI's is refused.
#define BOOST_TEST_MODULE test_comm_mpi_failures
#include <mpi.h>

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <string>

#include "comm_fixture.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

CommContext context(int rank, int world, std::chrono::milliseconds timeout) {
  CommContext ctx;
  ctx.ranks = rank_of(rank, world);
  ctx.backend = &cpu();
  ctx.timeout = timeout;
  return ctx;
}

}  // namespace

BOOST_AUTO_TEST_CASE(timeout_names_the_op_and_poisons) {
  const int world = env_int("OMPI_COMM_WORLD_SIZE", 1);
  const int rank = env_int("OMPI_COMM_WORLD_RANK", 0);
  BOOST_REQUIRE_MESSAGE(world == 2, "run under mpirun -np 2");
  int provided = 0;
  BOOST_REQUIRE(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS);
  BOOST_REQUIRE(provided == MPI_THREAD_MULTIPLE);
  {
    // Ranks that are not MPI's: every rank claims to be rank 0 of 3.
    auto wrong = make_communicator("mpi", "", rank_of(0, 3));
    const std::string refused = error_text<CommError>([&] { wrong->connect(context(0, 3, std::chrono::seconds(5))); });
    BOOST_TEST_MESSAGE(refused);
    BOOST_CHECK(refused.find("MPI_COMM_WORLD says rank " + std::to_string(rank) + " of 2") != std::string::npos);
    BOOST_CHECK(refused.find("mpirun") != std::string::npos);
  }
  auto comm = make_communicator("mpi", "", rank_of(rank, world));
  comm->connect(context(rank, world, std::chrono::milliseconds(500)));
  Tensor t = make_tensor({1, 2, 3}, DType::bf16);
  if (rank == 0) {
    const std::string timed_out = error_text<CommError>([&] { comm->all_reduce(t, ReduceOp::sum)->wait(); });
    BOOST_TEST_MESSAGE(timed_out);
    BOOST_CHECK(timed_out.find("mpi all_reduce #0 (bf16 x 3, sum) on rank 0 of 2 failed") != std::string::npos);
    BOOST_CHECK(timed_out.find("timeout of 0.5 s") != std::string::npos);
    const std::string later = error_text<CommError>([&] { comm->broadcast(t, 0)->wait(); });
    BOOST_TEST_MESSAGE(later);
    BOOST_CHECK(later.find("unusable after an earlier failure") != std::string::npos);
    BOOST_CHECK(later.find("all_reduce #0") != std::string::npos);
    int go = 1;
    MPI_Send(&go, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  } else {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    comm->all_reduce(t, ReduceOp::sum)->wait();  // completes rank 0's abandoned all_reduce
    BOOST_CHECK(read_values(t) == (std::vector<double>{2, 4, 6}));
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0's plugin thread has finished its collective by now
  comm.reset();
  MPI_Finalize();
}

}  // namespace kiln::test
