// StarPath: the gloo plugin's path for small all-reduces, through rank 0 over plain TCP.
//
// Why: below about a megabyte an all-reduce is latency, and Gloo's TCP transport is slow at it
// on few-core machines: its device thread loops on epoll_wait while data waits to be read, and
// takes the cores the ranks need (docs/benchmarks.md measured 0.3-6 ms per 1-512 KB all-reduce
// on 2 cores, against 0.08-0.6 ms for a star). So all-reduces whose hub traffic, bytes x
// (ranks - 1), is at most `comm.star_max_bytes` go here: every rank sends its tensor to rank 0,
// which combines them in rank order (f16/bf16 in f32, rounded once) and sends the result back.
// Every rank gets the same bits, and the same inputs always give the same result. Larger ones
// stay on Gloo's algorithm, where a ring moves less data through any one rank -- the choice by
// size NCCL makes between its algorithms.
//
// Only the gloo communicator's one communication thread calls all_reduce(), in issue order, so
// a collective's number (shared with the Gloo path) checks that the ranks agree. Deadlines:
// every send and receive gives up at the collective's timeout. close_connections() wakes a
// blocked call from any thread (abort()).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <kiln/sdk/tcp_link.hpp>

#include "kiln/communicator.hpp"
#include "kiln/store.hpp"
#include "kiln/tensor.hpp"

namespace kiln::gloo_comm {

class StarPath {
 public:
  /// Connects the ranks: rank 0 listens on a free port and publishes it under
  /// "<prefix>/star/port"; the others connect to `hub_host` (rank 0's address as Gloo reaches it)
  /// and introduce themselves. Throws CommError naming what failed.
  StarPath(Store& store, const std::string& prefix, int rank, int world, const std::string& hub_host,
           std::chrono::milliseconds timeout);

  /// In place over `count` elements of f32, f64, f16 or bf16; `seq` is the collective's number.
  void all_reduce(void* data, DType dtype, std::size_t count, ReduceOp op, std::uint64_t seq);
  /// Shuts every connection down (abort path); safe from any thread.
  void close_connections() noexcept;
  /// "rank 0 at 127.0.0.1:41235"
  const std::string& hub() const { return hub_; }

 private:
  void send(int to, std::uint64_t seq, const void* data, std::size_t bytes, sdk::TcpClock::time_point deadline);
  void receive(int from, std::uint64_t seq, void* data, std::size_t bytes, sdk::TcpClock::time_point deadline);
  void reduce_on_hub(void* data, DType dtype, std::size_t count, ReduceOp op, std::uint64_t seq,
                     sdk::TcpClock::time_point deadline);

  int rank_, world_;
  std::chrono::milliseconds timeout_;
  std::string hub_;
  std::vector<sdk::TcpLink> links_;  ///< rank 0: one per other rank ([0] unused); others: [0], the hub
  std::vector<std::uint8_t> part_;   ///< rank 0: one peer's tensor
  std::vector<float> wide_, wide_part_;  ///< rank 0: f16/bf16 widened to f32
};

}  // namespace kiln::gloo_comm
