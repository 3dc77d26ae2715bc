// The doctor's decision (comm_doctor.hpp).
#include "comm_doctor.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace kiln::cli {
namespace {

/// "# Avg bus bandwidth    : 1.25" from bench-comm's table, or "".
std::string bandwidth_line(const std::string& output) {
  const auto at = output.find("# Avg bus bandwidth");
  if (at == std::string::npos) return "";
  const auto colon = output.find(':', at);
  const auto end = output.find('\n', at);
  if (colon == std::string::npos || colon > end) return "";
  std::string value = output.substr(colon + 1, end - colon - 1);
  value.erase(0, value.find_first_not_of(' '));
  return value;
}

std::string what_happened(const CommAttempt& a, const DoctorFacts& f) {
  if (a.timed_out) {
    return fmt::format("it did not finish within {:g} s and was stopped (a hang)", f.deadline_s);
  }
  return fmt::format("it failed (exit status {}): {}", a.exit_code, failure_line(a.output));
}

}  // namespace

bool is_nccl_comm(const std::string& comm) { return comm.rfind("nccl", 0) == 0; }

std::string failed_before_the_communicator(const CommAttempt& a) {
  if (a.timed_out) return "";
  const std::string cause = failure_line(a.output);
  // Errors from a plugin call name the plugin first ("backend plugin 'cuda' (...): ...",
  // plugin_call.hpp); the communicator's own, and the collectives' timeouts, do not start so.
  for (const char* kind : {"backend", "model", "data", "precision"}) {
    if (cause.rfind(fmt::format("{} plugin '", kind), 0) == 0) return fmt::format("the {} plugin", kind);
  }
  return "";
}

std::string failure_line(const std::string& output) {
  const auto line_at = [&](std::size_t at) { return output.substr(at + 13, output.find('\n', at) - at - 13); };
  const auto first = output.find("kiln: error: ");
  if (first != std::string::npos) {
    // The first is the cause a rank reported; under --nproc the supervisor's summary comes last.
    const std::string cause = line_at(first);
    const std::string last = line_at(output.rfind("kiln: error: "));
    return last == cause ? cause : cause + "; then: " + last;
  }
  std::istringstream in(output);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  }
  return last.empty() ? "(no output)" : last;
}

std::string iommu_facts() {
  namespace fs = std::filesystem;
  std::size_t groups = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/sys/kernel/iommu_groups", ec), end; !ec && it != end; it.increment(ec)) ++groups;
  std::string cmdline;
  std::getline(std::ifstream("/proc/cmdline"), cmdline);
  std::vector<std::string> settings;
  std::istringstream words(cmdline);
  for (std::string w; words >> w;) {
    if (w.find("iommu") != std::string::npos) settings.push_back(w);
  }
  return fmt::format("{} ({} IOMMU groups in /sys/kernel/iommu_groups; kernel command line: {})",
                     groups > 0 ? "the IOMMU is on" : "the IOMMU is off", groups,
                     settings.empty() ? "no iommu setting" : fmt::format("{}", fmt::join(settings, " ")));
}

Diagnosis diagnose_comm(const DoctorFacts& f, const RunAttempt& run) {
  Diagnosis d;
  const std::string what = fmt::format("an all-reduce of 8 B to 4 MB on {} rank(s) with {}", f.nproc, f.comm);
  const CommAttempt first = run({});
  if (first.exit_code == 0 && !first.timed_out) {
    const std::string bw = bandwidth_line(first.output);
    d.report = fmt::format("ok: {}: every result checked{}\n", what,
                           bw.empty() ? "" : fmt::format(", average bus bandwidth {} GB/s", bw));
    return d;
  }
  d.exit_code = 1;
  std::string r = fmt::format("failed: {}: {}\n  ran: {}\n", what, what_happened(first, f), f.command);
  if (const std::string culprit = failed_before_the_communicator(first); !culprit.empty()) {
    // Trying again without peer-to-peer transfers would fail the same way and say nothing new.
    r += fmt::format("  Not the communicator: {} failed before any collective ran (the error above). Fix that, then\n"
                     "  run the doctor again.\n",
                     culprit);
  } else if (is_nccl_comm(f.comm) && !f.p2p_already_off) {
    const CommAttempt second = run({{"NCCL_P2P_DISABLE", "1"}});
    if (second.exit_code == 0 && !second.timed_out) {
      r += fmt::format(
          "works without peer-to-peer transfers: the same all-reduce with NCCL_P2P_DISABLE=1 passed.\n"
          "  So the GPUs cannot reach each other directly. The usual cause is PCIe Access Control Services\n"
          "  (ACS) on a switch or root port, or the IOMMU, routing peer-to-peer traffic through the CPU or\n"
          "  blocking it; here {}.\n"
          "  - look for ACS: sudo lspci -vvv | grep -i acsctl (SrcValid+ on a bridge between the GPUs);\n"
          "    disable it in the BIOS or with setpci, or boot with iommu=pt (or intel_iommu=off/amd_iommu=off)\n"
          "  - nvidia-smi topo -m shows the path between each pair of GPUs\n"
          "  - meanwhile, train with NCCL_P2P_DISABLE=1 exported: correct, and slower\n"
          "  - https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs\n",
          f.iommu);
    } else {
      r += fmt::format("  with NCCL_P2P_DISABLE=1 too: {}\n", what_happened(second, f));
      r += "  Not a peer-to-peer problem. Rerun with NCCL_DEBUG=INFO exported to see where NCCL stops, and\n"
           "  check that every rank sees its own GPU (nvidia-smi; CUDA_VISIBLE_DEVICES).\n";
    }
  } else if (is_nccl_comm(f.comm)) {
    r += "  NCCL_P2P_DISABLE=1 was already set. Rerun with NCCL_DEBUG=INFO exported to see where NCCL stops.\n";
  } else if (f.comm == "mpi") {
    r += "  Rerun the command above to see all of its output, mpirun's included. The mpi communicator's ranks\n"
         "  must all be started by one mpirun; Open MPI chooses the network interface with\n"
         "  OMPI_MCA_btl_tcp_if_include (exported, e.g. =lo on one machine), and a firewall must let the ranks\n"
         "  reach each other.\n";
  } else {
    r += "  Rerun the command above to see all of its output; for gloo, comm.interface chooses the network\n"
         "  interface (--set comm.interface=...), and a firewall must let the ranks reach each other.\n";
  }
  d.report = r;
  return d;
}

}  // namespace kiln::cli
