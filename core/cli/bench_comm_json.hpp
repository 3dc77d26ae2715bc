// The JSON report of `kiln bench-comm --json` / `-J FILE`, in nccl-tests' own schema (version 2
// of its `-J` file, src/util.cu), so tools that read nccl-tests JSON read Kiln's unchanged.
// docs/bench-comm.md lists every field; what Kiln adds lives under the extra key "kiln".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cli {

struct BenchJsonDevice {
  int rank = 0;
  int pid = 0;
  std::string hostname;
  int device = 0;
  std::string device_hex;   ///< nccl-tests: PCI address; Kiln: the backend's name
  std::string device_info;  ///< the device's name
};

struct BenchJsonHalf {
  double time_us = 0, alg_bw = 0, bus_bw = 0;
  std::int64_t wrong = -1;  ///< -1: not checked (-c 0), written as null
};

struct BenchJsonRow {
  std::int64_t size = 0, count = 0;
  BenchJsonHalf out_of_place, in_place;
};

struct BenchJsonReport {
  std::string start_time, end_time;  ///< "%Y-%m-%d %H:%M:%S", local time, as nccl-tests
  std::vector<std::string> args;     ///< the command line, "kiln" "bench-comm" first
  std::vector<std::string> env;      ///< NAME=VALUE of the variables that steer a run (see .cpp)
  std::int64_t min_bytes = 0, max_bytes = 0, step_factor = 0, step_bytes = 0;
  int warmup_iters = 0, iters = 0, check = 0;
  std::vector<BenchJsonDevice> devices;
  std::string type, redop;
  std::vector<BenchJsonRow> results;
  std::int64_t wrong_total = 0;
  double avg_bus_bw = 0;
  // Kiln's additions, under "kiln".
  std::string comm, comm_describe, backend, ranks_from;
  int world_size = 1;
};

/// The report as one line of JSON (no trailing newline).
std::string bench_json_text(const BenchJsonReport& r);

/// Now, formatted as nccl-tests formats start_time and end_time.
std::string bench_json_now();

/// The environment variables that decide how a communication benchmark runs (NCCL_*, KILN_*,
/// GLOO_*, OMPI_*, UCX_*, MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK...), sorted. nccl-tests
/// writes the whole environment; Kiln writes only these so a report never carries unrelated secrets.
std::vector<std::string> bench_json_env(char** envp);

}  // namespace kiln::cli
