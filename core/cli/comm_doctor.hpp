// What `kiln doctor` concludes from its all-reduce attempts (doctor_command.hpp runs them).
//
// Why: a communicator that hangs or fails says little about why. The best-known case is NCCL
// between GPUs whose peer-to-peer path is blocked by PCIe ACS or the IOMMU: the all-reduce hangs,
// and only NCCL_P2P_DISABLE=1 makes it work (pain #6 in conventions.md; NVIDIA/nccl#257, #631,
// #2079). The doctor runs a small, checked all-reduce with a short timeout; when an nccl-*
// communicator fails it tries again without peer-to-peer transfers, and if that works it says
// so, with what to look at. The decision is kept apart from the processes so that it is tested
// without GPUs.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace kiln::cli {

/// One run of the check (`kiln bench-comm` with a few small sizes, results checked).
struct CommAttempt {
  int exit_code = 0;
  bool timed_out = false;  ///< killed at the doctor's own deadline
  std::string output;      ///< stdout and stderr together
};

/// Extra environment variables for one attempt.
using AttemptEnv = std::map<std::string, std::string>;
using RunAttempt = std::function<CommAttempt(const AttemptEnv&)>;

struct DoctorFacts {
  std::string comm;             ///< the communicator plugin checked
  int nproc = 2;                ///< ranks
  double deadline_s = 0;        ///< the doctor's own limit on one attempt
  std::string command;          ///< the attempt's command line, for the user to rerun
  bool p2p_already_off = false; ///< NCCL_P2P_DISABLE=1 was set by the user already
  std::string iommu;            ///< what the machine says about its IOMMU (iommu_facts())
};

struct Diagnosis {
  int exit_code = 0;   ///< 0: the first attempt worked
  std::string report;  ///< lines for the console
};

/// Whether `comm` names an NCCL communicator (nccl-ring, nccl-tree): it needs the cuda backend
/// and honours NCCL_P2P_DISABLE.
bool is_nccl_comm(const std::string& comm);

/// Runs `run` once, and once more with NCCL_P2P_DISABLE=1 when an nccl-* communicator failed or
/// hung (not when the failure came from before it: failed_before_the_communicator()).
Diagnosis diagnose_comm(const DoctorFacts& facts, const RunAttempt& run);

/// "the backend plugin" (model, data, precision) when the attempt failed with an error of that
/// plugin -- no CUDA device, a library that does not load -- before any collective could run;
/// "" when it may be the communicator's (its own errors, a timeout, a hang).
std::string failed_before_the_communicator(const CommAttempt& attempt);

/// The first "kiln: error: ..." line of `output` (the cause) and, when another follows, the last
/// one (the supervisor's summary) after "; then: "; else its last non-empty line.
std::string failure_line(const std::string& output);

/// The IOMMU as the machine shows it: the number of /sys/kernel/iommu_groups and the iommu
/// settings on the kernel command line, in one sentence.
std::string iommu_facts();

}  // namespace kiln::cli
