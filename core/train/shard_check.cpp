// What each rank reads, said and checked (see the header).
#include "kiln/train/shard_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kiln/errors.hpp"
#include "kiln/sdk/crc32c.hpp"
#include "kiln/train/collective_purpose.hpp"

namespace kiln::train {
namespace {

constexpr std::int64_t kFirstShown = 3;  // sample indices shard_line() names

/// Samples an epoch of `steps` leaves out: only last_batch = "drop" leaves any.
std::int64_t left_out_per_epoch(const data::ShardOptions& o, std::int64_t steps) {
  return o.last_batch == data::LastBatch::drop ? o.count - steps * o.batch * o.world_size : 0;
}

/// Every rank's list for `epoch`, gathered through the communicator (as f64: exact below 2^53,
/// and every communicator reduces and gathers f64).
std::vector<std::vector<std::int64_t>> gather_lists(Backend& backend, Communicator& comm,
                                                    const data::Sharder& sharder, std::int64_t epoch) {
  const std::vector<std::int64_t> mine = rank_epoch_list(sharder, epoch);
  const auto n = static_cast<std::int64_t>(mine.size());
  const int world = comm.size();
  Tensor mine_host = host_tensor({n}, DType::f64);
  for (std::int64_t i = 0; i < n; ++i) mine_host.data_as<double>()[i] = static_cast<double>(mine[static_cast<std::size_t>(i)]);
  Tensor mine_dev = backend.allocate({n}, DType::f64, MemoryKind::device);
  Tensor all_dev = backend.allocate({world * n}, DType::f64, MemoryKind::device);
  backend.copy(mine_host, mine_dev);
  {
    const CollectivePurpose purpose("--check-sharding: every rank's samples of an epoch");
    comm.all_gather(all_dev, mine_dev)->wait();
  }
  Tensor all_host = host_tensor({world * n}, DType::f64);
  backend.copy(all_dev, all_host);
  std::vector<std::vector<std::int64_t>> lists(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    const double* p = all_host.data_as<double>() + static_cast<std::ptrdiff_t>(r) * n;
    lists[static_cast<std::size_t>(r)].assign(p, p + n);  // f64 -> int64, exact
  }
  return lists;
}

}  // namespace

std::vector<std::int64_t> rank_epoch_list(const data::Sharder& sharder, std::int64_t epoch) {
  const std::int64_t batch = sharder.options().batch;
  const std::vector<std::int64_t> order = sharder.epoch_order(epoch);
  std::vector<std::int64_t> out(static_cast<std::size_t>(sharder.steps_per_epoch() * batch), -1);
  for (std::int64_t step = 0; step < sharder.steps_per_epoch(); ++step) {
    const data::BatchIndices b = sharder.batch_in_order(order, step);
    std::copy_n(b.indices.begin(), b.valid, out.begin() + step * batch);
  }
  return out;
}

std::string shard_line(const data::Sharder& sharder, std::int64_t epoch) {
  const auto& o = sharder.options();
  const std::vector<std::int64_t> list = rank_epoch_list(sharder, epoch);
  std::vector<std::int64_t> first;
  std::int64_t reads = 0;
  for (std::int64_t index : list) {
    if (index < 0) continue;
    ++reads;
    if (static_cast<std::int64_t>(first.size()) < kFirstShown) first.push_back(index);
  }
  const std::int64_t dropped = left_out_per_epoch(o, sharder.steps_per_epoch());
  const std::string left_out =
      dropped > 0 ? fmt::format("; last_batch = \"drop\" leaves {} out", dropped)
                  : fmt::format("; last_batch = \"{}\"", data::last_batch_name(o.last_batch));
  return fmt::format("rank {}/{} reads {} of {} samples per epoch ({} steps of {}{}); epoch {} starts with samples {}, "
                     "list digest {:08x}",
                     o.rank, o.world_size, reads, o.count, sharder.steps_per_epoch(), o.batch, left_out, epoch + 1,
                     fmt::join(first, ", "), io::crc32c(list.data(), list.size() * sizeof(std::int64_t)));
}

std::int64_t verify_epoch(const std::vector<std::vector<std::int64_t>>& lists, const data::ShardOptions& shard,
                          std::int64_t epoch) {
  // Who read each sample first: rank and position, to name both readers of a duplicate.
  struct Reader {
    int rank = -1;
    std::int64_t at = 0;
  };
  std::vector<Reader> reader(static_cast<std::size_t>(shard.count));
  const auto step_of = [&](std::int64_t at) { return at / shard.batch + 1; };
  for (std::size_t r = 0; r < lists.size(); ++r) {
    for (std::size_t at = 0; at < lists[r].size(); ++at) {
      const std::int64_t index = lists[r][at];
      if (index == -1) continue;
      const auto a = static_cast<std::int64_t>(at);
      if (index < 0 || index >= shard.count) {
        throw DataError(fmt::format("--check-sharding: in epoch {}, rank {} would read sample {} at step {}, outside "
                                    "the {} samples of the source",
                                    epoch + 1, r, index, step_of(a), shard.count));
      }
      Reader& first = reader[static_cast<std::size_t>(index)];
      if (first.rank >= 0) {
        throw DataError(fmt::format("--check-sharding: in epoch {}, sample {} would be read twice: by rank {} at step "
                                    "{} and by rank {} at step {}",
                                    epoch + 1, index, first.rank, step_of(first.at), r, step_of(a)));
      }
      first = {static_cast<int>(r), a};
    }
  }
  const std::int64_t never = std::count_if(reader.begin(), reader.end(), [](const Reader& x) { return x.rank < 0; });
  const std::int64_t steps = lists.empty() ? 0 : static_cast<std::int64_t>(lists[0].size()) / shard.batch;
  const std::int64_t may_miss = left_out_per_epoch(shard, steps);
  if (never != may_miss) {
    const auto it = std::find_if(reader.begin(), reader.end(), [](const Reader& x) { return x.rank < 0; });
    throw DataError(fmt::format("--check-sharding: in epoch {}, {} samples would never be read (first: sample {}); "
                                "last_batch = \"{}\" leaves out {}",
                                epoch + 1, never, it == reader.end() ? -1 : it - reader.begin(),
                                data::last_batch_name(shard.last_batch), may_miss));
  }
  return never;
}

std::string check_sharding(Backend& backend, Communicator& comm, const data::ShardOptions& shard,
                           std::int64_t first_epoch, std::int64_t epochs) {
  const data::Sharder sharder(shard);
  const std::int64_t last = std::min(first_epoch + 1, epochs - 1);
  std::int64_t left_out = 0;
  std::vector<std::int64_t> previous;  // rank 0's list of the epoch before
  bool reshuffled = true;
  for (std::int64_t e = first_epoch; e <= last; ++e) {
    const auto lists = gather_lists(backend, comm, sharder, e);
    left_out = verify_epoch(lists, shard, e);
    if (e > first_epoch) reshuffled = lists[0] != previous;
    previous = lists[0];
  }
  // (Ten samples or more: a shuffle of fewer may repeat an order by chance.)
  if (shard.shuffle == data::Shuffle::yes && !reshuffled && shard.count >= 10) {
    throw DataError(fmt::format("--check-sharding: epoch {} would read the samples in epoch {}'s order; the order "
                                "must change every epoch",
                                last + 1, first_epoch + 1));
  }
  const std::string epochs_text =
      last > first_epoch ? fmt::format("epochs {} and {}", first_epoch + 1, last + 1) : fmt::format("epoch {}", last + 1);
  std::string line = fmt::format("--check-sharding: {} checked on {} ranks: every sample of {} is read by exactly one "
                                 "rank in {} steps",
                                 epochs_text, comm.size(), shard.count, sharder.steps_per_epoch());
  if (left_out > 0) line += fmt::format(", except {} that last_batch = \"drop\" leaves out", left_out);
  if (last > first_epoch) {
    line += shard.shuffle == data::Shuffle::yes ? "; the order changes between epochs" : "; shuffle is off: one order";
  }
  return line;
}

}  // namespace kiln::train
