// MPI's own all-reduce, measured the way `kiln bench-comm` measures (the yardstick for the `mpi`
// communicator): in-place MPI_Allreduce of f32 sum on MPI_COMM_WORLD, sizes min..max by factor,
// `warmup` untimed then `iters` timed calls each waited before the next, time per call averaged
// over ranks; algbw = bytes / time, busbw = algbw x 2 (n - 1) / n (nccl-tests' all-reduce factor).
// Rank 0 prints one line per size: "size count time_us algbw_gbs busbw_gbs".
//
// usage: mpirun -np 4 mpi_allreduce [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

long long parse_size(const char* text) {
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  else if (*end == 'M' || *end == 'm') v <<= 20;
  else if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  long long min = 8, max = 64LL << 20, factor = 2;
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-b") min = parse_size(argv[i + 1]);
    else if (flag == "-e") max = parse_size(argv[i + 1]);
    else if (flag == "-f") factor = std::atoll(argv[i + 1]);
    else if (flag == "-n") iters = std::atoi(argv[i + 1]);
    else if (flag == "-w") warmup = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "mpi_allreduce: unknown flag %s\n", flag.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int version_len = 0;
  MPI_Get_library_version(version, &version_len);
  if (const char* nl = std::strpbrk(version, ",\n")) version[nl - version] = '\0';
  if (rank == 0) std::printf("# MPI_Allreduce in place, f32 sum, %d ranks, %s, %d iters after %d warm-up\n", world, version, iters, warmup);
  std::vector<float> buffer(static_cast<std::size_t>(max / 4 + 1), 1.0f);
  for (long long bytes = min; bytes <= max; bytes *= factor) {
    const int count = static_cast<int>(bytes / 4);
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double seconds = (MPI_Wtime() - start) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    seconds /= world;
    const double algbw = static_cast<double>(count) * 4.0 / seconds / 1e9;
    const double busbw = algbw * 2.0 * (world - 1) / world;
    if (rank == 0) std::printf("%lld %d %.2f %.4f %.4f\n", static_cast<long long>(count) * 4, count, seconds * 1e6, algbw, busbw);
    if (factor <= 1) break;
  }
  MPI_Finalize();
  return 0;
}
