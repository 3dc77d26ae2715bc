// Rank 0's parameters for everyone, checked by checksum; and small metric reductions.
#include "kiln/train/param_sync.hpp"

#include <fmt/format.h>

#include <cstring>
#include <set>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/train/collective_purpose.hpp"

namespace kiln::train {
namespace {

/// Whole-storage views of the distinct storages behind `tensors` (each parameter arena once).
std::vector<Tensor> distinct_storages(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  std::set<const Storage*> seen;
  for (const Tensor& t : tensors) {
    if (!t.defined() || !seen.insert(t.storage().get()).second) continue;
    out.emplace_back(t.storage(), Shape{static_cast<std::int64_t>(t.storage()->bytes())}, DType::u8);
  }
  return out;
}

double checksum(Backend& backend, const std::vector<Tensor>& arenas) {
  // FNV-1a over the bytes, folded to 52 bits so it is exact in a double.
  std::uint64_t h = 1469598103934665603ull;
  for (const Tensor& a : arenas) {
    Tensor host = host_tensor(a.shape(), DType::u8);
    backend.copy(a, host);
    const auto* p = host.data_as<std::uint8_t>();
    for (std::int64_t i = 0; i < host.numel(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return static_cast<double>(h & ((1ull << 52) - 1));
}

}  // namespace

void broadcast_initial_parameters(Backend& backend, Communicator& comm, std::span<const Parameter> params,
                                  std::span<const ModelBuffer> buffers) {
  std::vector<Tensor> tensors;
  for (const auto& p : params) tensors.push_back(p.value);
  for (const auto& b : buffers) tensors.push_back(b.value);
  const auto arenas = distinct_storages(tensors);
  const CollectivePurpose purpose("rank 0's initial parameters");
  for (const Tensor& a : arenas) comm.broadcast(a, 0)->wait();

  const int world = comm.size();
  Tensor mine = backend.allocate({1}, DType::f64, MemoryKind::device);
  Tensor all = backend.allocate({world}, DType::f64, MemoryKind::device);
  Tensor mine_host = host_tensor({1}, DType::f64);
  mine_host.data_as<double>()[0] = checksum(backend, arenas);
  backend.copy(mine_host, mine);
  comm.all_gather(all, mine)->wait();
  Tensor all_host = host_tensor({world}, DType::f64);
  backend.copy(all, all_host);
  const double* sums = all_host.data_as<double>();
  std::vector<int> differ;
  for (int r = 1; r < world; ++r) {
    if (sums[r] != sums[0]) differ.push_back(r);
  }
  if (!differ.empty()) {
    throw CommError(fmt::format("after broadcasting rank 0's initial parameters, ranks {} hold different "
                                "values (checksum mismatch); the communicator's broadcast is broken",
                                fmt::join(differ, ", ")));
  }
}

std::vector<double> sum_over_ranks(Backend& backend, Communicator& comm, const std::vector<double>& values) {
  const auto n = static_cast<std::int64_t>(values.size());
  Tensor host = host_tensor({n}, DType::f64);
  std::memcpy(host.data(), values.data(), values.size() * sizeof(double));
  if (comm.size() == 1) return values;
  Tensor dev = backend.allocate({n}, DType::f64, MemoryKind::device);
  backend.copy(host, dev);
  comm.all_reduce(dev, ReduceOp::sum)->wait();
  backend.copy(dev, host);
  const double* p = host.data_as<double>();
  return std::vector<double>(p, p + n);
}

}  // namespace kiln::train
