// The star path for small all-reduces (see star_path.hpp).
#include "star_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include <kiln/sdk/half.hpp>

#include "average.hpp"
#include "kiln/errors.hpp"

namespace kiln::gloo_comm {
namespace {

using sdk::TcpClock;
using sdk::TcpError;

constexpr std::uint32_t kHello = 0x53544152;      // "STAR": a new connection says who it is
constexpr std::uint32_t kAllReduce = 0x414c4c52;  // "ALLR"

/// What precedes every message: which collective it belongs to and how many bytes follow.
struct Header {
  std::uint64_t seq = 0;
  std::uint32_t kind = 0;
  std::int32_t rank = 0;  ///< the sender
  std::uint64_t bytes = 0;
};

TcpClock::time_point deadline_after(std::chrono::milliseconds timeout) { return TcpClock::now() + timeout; }

/// acc[i] = op(acc[i], x[i]); avg sums (the caller divides).
template <class T>
void combine(T* acc, const T* x, std::size_t n, ReduceOp op) {
  if (op == ReduceOp::max) {
    for (std::size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
  } else if (op == ReduceOp::min) {
    for (std::size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], x[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
  }
}

}  // namespace

StarPath::StarPath(Store& store, const std::string& prefix, int rank, int world, const std::string& hub_host,
                   std::chrono::milliseconds timeout)
    : rank_(rank), world_(world), timeout_(timeout), links_(static_cast<std::size_t>(world)) {
  const std::string key = prefix + "/star/port";
  const auto deadline = deadline_after(timeout);
  try {
    if (rank == 0) {
      const sdk::TcpListener listener;
      const std::string port = std::to_string(listener.port());
      store.set(key, std::vector<std::uint8_t>(port.begin(), port.end()));
      hub_ = fmt::format("rank 0 at port {}", port);
      for (int connected = 1; connected < world; ++connected) {
        sdk::TcpLink link = listener.accept(deadline);
        Header hello;
        link.recv_all(&hello, sizeof hello, deadline);
        const int r = hello.rank;
        if (hello.kind != kHello || r < 1 || r >= world || hello.bytes != static_cast<std::uint64_t>(world) ||
            links_[static_cast<std::size_t>(r)].valid()) {
          throw TcpError(fmt::format("a connection introduced itself as rank {} of {}; expected one of ranks 1 to {} "
                                     "of {}, each once (another job on the same store?)",
                                     r, hello.bytes, world - 1, world));
        }
        links_[static_cast<std::size_t>(r)] = std::move(link);
      }
    } else {
      const std::vector<std::uint8_t> value = store.get(key, timeout);
      const std::string text(value.begin(), value.end());
      unsigned port = 0;
      const auto parsed = std::from_chars(text.data(), text.data() + text.size(), port);
      if (parsed.ec != std::errc() || parsed.ptr != text.data() + text.size() || port == 0 || port > 65535) {
        throw TcpError(fmt::format("the store's '{}' holds '{}', not a port (another job on the same store?)", key,
                                   text));
      }
      hub_ = fmt::format("rank 0 at {}:{}", hub_host, port);
      links_[0] = sdk::tcp_connect(hub_host, static_cast<std::uint16_t>(port), deadline);
      const Header hello{0, kHello, rank, static_cast<std::uint64_t>(world)};
      links_[0].send_all(&hello, sizeof hello, deadline);
    }
  } catch (const TcpError& e) {
    std::vector<int> missing;  // on rank 0: the ranks that never connected
    for (int r = 1; rank == 0 && r < world; ++r) {
      if (!links_[static_cast<std::size_t>(r)].valid()) missing.push_back(r);
    }
    const std::string waiting =
        missing.empty() ? std::string() : fmt::format(" waiting for rank(s) {} to connect", fmt::join(missing, ", "));
    throw CommError(fmt::format("gloo star connect on rank {} of {} ({}): {}{}; comm.star_max_bytes = 0 sends every "
                                "all-reduce through Gloo instead",
                                rank, world, hub_.empty() ? "rank 0" : hub_, e.what(), waiting));
  }
}

void StarPath::close_connections() noexcept {
  for (const sdk::TcpLink& link : links_) link.shut_down();
}

void StarPath::send(int to, std::uint64_t seq, const void* data, std::size_t bytes, TcpClock::time_point deadline) {
  const Header h{seq, kAllReduce, rank_, bytes};
  const sdk::TcpLink& link = links_[static_cast<std::size_t>(to)];
  try {
    link.send_all(&h, sizeof h, deadline);
    link.send_all(data, bytes, deadline);
  } catch (const TcpError& e) {
    throw TcpError(fmt::format("sending to rank {}: {}", to, e.what()));
  }
}

void StarPath::receive(int from, std::uint64_t seq, void* data, std::size_t bytes, TcpClock::time_point deadline) {
  const sdk::TcpLink& link = links_[static_cast<std::size_t>(from)];
  Header h;
  try {
    link.recv_all(&h, sizeof h, deadline);
  } catch (const TcpError& e) {
    throw TcpError(from == 0 ? fmt::format("rank 0 (the star's hub) did not send the result: {}", e.what())
                             : fmt::format("rank {} did not send its part: {}", from, e.what()));
  }
  if (h.seq != seq || h.kind != kAllReduce || h.bytes != bytes) {
    throw TcpError(fmt::format("rank {} sent collective #{} of {} bytes where #{} of {} bytes was expected: every rank "
                               "must issue the same collectives in the same order with the same sizes",
                               from, h.seq, h.bytes, seq, bytes));
  }
  try {
    link.recv_all(data, bytes, deadline);
  } catch (const TcpError& e) {
    throw TcpError(fmt::format("receiving from rank {}: {}", from, e.what()));
  }
}

void StarPath::all_reduce(void* data, DType dtype, std::size_t count, ReduceOp op, std::uint64_t seq) {
  if (count == 0 || world_ == 1) return;
  const std::size_t bytes = count * dtype_size(dtype);
  const auto deadline = deadline_after(timeout_);
  try {
    if (rank_ != 0) {
      send(0, seq, data, bytes, deadline);
      receive(0, seq, data, bytes, deadline);
      return;
    }
    reduce_on_hub(data, dtype, count, op, seq, deadline);
    for (int r = 1; r < world_; ++r) send(r, seq, data, bytes, deadline);
  } catch (const TcpError&) {
    // The communicator is unusable now; closing its connections makes the other ranks fail at
    // once ("the peer closed the connection") instead of waiting out their timeouts.
    close_connections();
    throw;
  }
}

void StarPath::reduce_on_hub(void* data, DType dtype, std::size_t count, ReduceOp op, std::uint64_t seq,
                             TcpClock::time_point deadline) {
  const std::size_t bytes = count * dtype_size(dtype);
  part_.resize(bytes);
  // Rank order, whoever arrives first: the result does not depend on timing.
  const auto each_part = [&](auto&& add) {
    for (int r = 1; r < world_; ++r) {
      receive(r, seq, part_.data(), bytes, deadline);
      add();
    }
  };
  switch (dtype) {
    case DType::f32: {
      auto* acc = static_cast<float*>(data);
      each_part([&] { combine(acc, reinterpret_cast<const float*>(part_.data()), count, op); });
      if (op == ReduceOp::avg) divide(acc, count, world_);
      return;
    }
    case DType::f64: {
      auto* acc = static_cast<double*>(data);
      each_part([&] { combine(acc, reinterpret_cast<const double*>(part_.data()), count, op); });
      if (op == ReduceOp::avg) divide(acc, count, world_);
      return;
    }
    case DType::f16:
    case DType::bf16: {
      const bool f16 = dtype == DType::f16;
      const auto widen = [&](const std::uint16_t* in, float* out) {
        f16 ? sdk::f16_to_f32(in, out, count) : sdk::bf16_to_f32(in, out, count);
      };
      auto* acc16 = static_cast<std::uint16_t*>(data);
      wide_.resize(count);
      wide_part_.resize(count);
      widen(acc16, wide_.data());
      each_part([&] {
        widen(reinterpret_cast<const std::uint16_t*>(part_.data()), wide_part_.data());
        combine(wide_.data(), wide_part_.data(), count, op);
      });
      if (op == ReduceOp::avg) divide(wide_.data(), count, world_);
      f16 ? sdk::f32_to_f16(wide_.data(), acc16, count) : sdk::f32_to_bf16(wide_.data(), acc16, count);
      return;
    }
    default:
      throw CommError(fmt::format("gloo all_reduce supports f32, f64, f16 and bf16, not {}", dtype_name(dtype)));
  }
}

}  // namespace kiln::gloo_comm
