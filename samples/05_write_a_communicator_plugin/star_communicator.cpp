// The `star` communicator: every rank holds one TCP connection to rank 0, the hub. A collective
// sends each rank's data to the hub, which combines it in rank order and sends the result back.
// That is simple and every rank gets the same bits, but the hub moves (world - 1) times the data
// of a ring all-reduce: `kiln bench-comm` shows what that costs next to `gloo`.
//
// What a communicator plugin must do, and where this one does it:
// - connect(): rendezvous through the Store the core gives it. The hub listens on a free port and
//   publishes host:port under a key; the others read it, connect and say which rank they are.
// - Asynchronous collectives: all_reduce/broadcast/all_gather return a Work at once and run on
//   one worker thread in the order they were issued (the core keeps several gradient buckets in
//   flight while backward goes on); Work::wait() waits for that one.
// - Timeouts: every send and receive gives up at the collective's deadline (the run's timeout), so
//   a rank that died or stopped calling ends in a CommError naming the op, its sequence number and
//   the rank, never in a hang.
// - abort(): shuts every socket down, which wakes the worker at once (the trainer's watchdog).
// - After any error the communicator is unusable, and it closes its sockets so that the other
//   ranks fail at once too instead of waiting out their timeouts.
// - Each message starts with a header (sequence number, op, byte count), so ranks that call
//   different collectives get an error saying so rather than mixing up each other's data.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <kiln/sdk/half.hpp>
#include <kiln/sdk/log.hpp>
#include <kiln/sdk/plugin.hpp>
#include <kiln/sdk/tcp_link.hpp>
#include <kiln/store.hpp>

namespace star {

// Sockets come from the SDK (kiln/sdk/tcp_link.hpp): listen, connect, and whole-buffer sends and
// receives that give up at a deadline.
using Clock = kiln::sdk::TcpClock;
using Link = kiln::sdk::TcpLink;
using Listener = kiln::sdk::TcpListener;
using LinkError = kiln::sdk::TcpError;

namespace {

enum class OpCode : std::uint32_t { hello = 1, all_reduce, broadcast, all_gather, barrier };

const char* op_name(OpCode op) {
  switch (op) {
    case OpCode::hello: return "connect";
    case OpCode::all_reduce: return "all_reduce";
    case OpCode::broadcast: return "broadcast";
    case OpCode::all_gather: return "all_gather";
    case OpCode::barrier: return "barrier";
  }
  return "?";
}

/// What precedes every message: which collective it belongs to and how many bytes follow.
struct Header {
  std::uint64_t seq = 0;
  std::uint32_t op = 0;
  std::int32_t rank = 0;  ///< the sender
  std::uint64_t bytes = 0;
};

/// acc[i] = op(acc[i], x[i]); `avg` sums here and divides at the end.
template <class T>
void combine(T* acc, const T* x, std::size_t n, kiln::ReduceOp op) {
  for (std::size_t i = 0; i < n; ++i) {
    if (op == kiln::ReduceOp::max) acc[i] = std::max(acc[i], x[i]);
    else if (op == kiln::ReduceOp::min) acc[i] = std::min(acc[i], x[i]);
    else acc[i] += x[i];
  }
}

/// A collective's result, for Work::wait().
class FutureWork final : public kiln::Work {
 public:
  explicit FutureWork(std::future<void> done) : done_(std::move(done)) {}
  void wait() override { done_.get(); }  // rethrows the collective's CommError

 private:
  std::future<void> done_;
};

}  // namespace

class StarCommunicator final : public kiln::Communicator {
 public:
  explicit StarCommunicator(const kiln::PluginArgs& args) : host_(args.params->get_string("host")) {}

  ~StarCommunicator() override {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    abort();  // a job still blocked in a socket returns at once
    if (worker_.joinable()) worker_.join();
  }

  std::string_view name() const override { return "star"; }
  int rank() const override { return ranks_.rank; }
  int size() const override { return ranks_.world_size; }
  bool accepts(kiln::MemoryKind kind) const override { return kind == kiln::MemoryKind::host; }
  std::string describe() const override {
    return fmt::format("star over tcp: {} rank(s) connected to rank 0 at {}", ranks_.world_size - 1, hub_address_);
  }

  void connect(const kiln::CommContext& ctx) override {
    ranks_ = ctx.ranks;
    timeout_ = ctx.timeout;
    const auto deadline = Clock::now() + timeout_;
    links_.resize(static_cast<std::size_t>(size()));
    try {
      if (rank() == 0) {
        accept_all(*ctx.store, deadline);
      } else {
        connect_to_hub(*ctx.store, deadline);
      }
    } catch (const LinkError& e) {
      throw kiln::CommError(fmt::format("star connect on rank {} of {}: {}", rank(), size(), e.what()));
    }
    worker_ = std::thread([this] { work(); });
    log_->info("star connected: rank {} of {} (from {}), hub {}, timeout {} s", rank(), size(), ranks_.source,
               hub_address_, timeout_.count() / 1000.0);
  }

  std::unique_ptr<kiln::Work> all_reduce(const kiln::Tensor& t, kiln::ReduceOp op) override {
    const auto dtype = t.dtype();
    if (dtype != kiln::DType::f32 && dtype != kiln::DType::f64 && dtype != kiln::DType::f16 &&
        dtype != kiln::DType::bf16) {
      throw kiln::CommError(fmt::format("star all_reduce: {} is not supported; star reduces f32, f64, f16 and bf16",
                                        t.describe()));
    }
    return submit(OpCode::all_reduce, [this, t, op](std::uint64_t seq, Clock::time_point deadline) {
      if (rank() != 0) {
        send(0, seq, OpCode::all_reduce, t.data(), t.bytes(), deadline);
        receive(0, seq, OpCode::all_reduce, t.data(), t.bytes(), deadline);
        return;
      }
      reduce_on_hub(t, op, seq, deadline);
      for (int r = 1; r < size(); ++r) send(r, seq, OpCode::all_reduce, t.data(), t.bytes(), deadline);
    });
  }

  std::unique_ptr<kiln::Work> broadcast(const kiln::Tensor& t, int root) override {
    if (root < 0 || root >= size()) {
      throw kiln::CommError(fmt::format("star broadcast: root {} is not a rank of a world of {}", root, size()));
    }
    return submit(OpCode::broadcast, [this, t, root](std::uint64_t seq, Clock::time_point deadline) {
      if (rank() != 0) {
        if (rank() == root) send(0, seq, OpCode::broadcast, t.data(), t.bytes(), deadline);
        else receive(0, seq, OpCode::broadcast, t.data(), t.bytes(), deadline);
        return;
      }
      if (root != 0) receive(root, seq, OpCode::broadcast, t.data(), t.bytes(), deadline);
      for (int r = 1; r < size(); ++r) {
        if (r != root) send(r, seq, OpCode::broadcast, t.data(), t.bytes(), deadline);
      }
    });
  }

  std::unique_ptr<kiln::Work> all_gather(const kiln::Tensor& out, const kiln::Tensor& in) override {
    if (out.dtype() != in.dtype() || out.numel() != in.numel() * size()) {
      throw kiln::CommError(fmt::format("star all_gather into {} from {}: out must hold {} times in", out.describe(),
                                        in.describe(), size()));
    }
    return submit(OpCode::all_gather, [this, out, in](std::uint64_t seq, Clock::time_point deadline) {
      auto* slots = static_cast<char*>(out.data());
      if (rank() != 0) {
        send(0, seq, OpCode::all_gather, in.data(), in.bytes(), deadline);
        receive(0, seq, OpCode::all_gather, slots, out.bytes(), deadline);
        return;
      }
      if (in.bytes() > 0) std::memmove(slots, in.data(), in.bytes());  // (empty tensors may have no data)
      for (int r = 1; r < size(); ++r) {
        receive(r, seq, OpCode::all_gather, slots + static_cast<std::size_t>(r) * in.bytes(), in.bytes(), deadline);
      }
      for (int r = 1; r < size(); ++r) send(r, seq, OpCode::all_gather, slots, out.bytes(), deadline);
    });
  }

  void barrier() override {
    submit(OpCode::barrier, [this](std::uint64_t seq, Clock::time_point deadline) {
      if (rank() != 0) {
        send(0, seq, OpCode::barrier, nullptr, 0, deadline);
        receive(0, seq, OpCode::barrier, nullptr, 0, deadline);
        return;
      }
      for (int r = 1; r < size(); ++r) receive(r, seq, OpCode::barrier, nullptr, 0, deadline);
      for (int r = 1; r < size(); ++r) send(r, seq, OpCode::barrier, nullptr, 0, deadline);
    })->wait();
  }

  void abort() noexcept override {
    aborted_ = true;
    for (const Link& link : links_) link.shut_down();
  }

 private:
  using Job = std::function<void(std::uint64_t seq, Clock::time_point deadline)>;

  // ---- connecting ----

  std::string hub_key() const { return "star/hub"; }

  void accept_all(kiln::Store& store, Clock::time_point deadline) {
    const Listener listener;
    // All ranks on this machine: the loopback address; otherwise `host`, or this machine's name.
    std::string host = host_;
    if (host.empty()) host = ranks_.local_world_size == ranks_.world_size ? "127.0.0.1" : hostname();
    hub_address_ = fmt::format("{}:{}", host, listener.port());
    store.set(hub_key(), std::vector<std::uint8_t>(hub_address_.begin(), hub_address_.end()));
    for (int connected = 1; connected < size(); ++connected) {
      Link link;
      try {
        link = listener.accept(deadline);
      } catch (const LinkError& e) {
        throw LinkError(fmt::format("{} waiting for {}; check that every rank was started and uses the same store",
                                    e.what(), missing_ranks()));
      }
      Header hello;
      link.recv_all(&hello, sizeof hello, deadline);
      const int r = hello.rank;
      if (hello.op != static_cast<std::uint32_t>(OpCode::hello) || r < 1 || r >= size() ||
          hello.bytes != static_cast<std::uint64_t>(size()) || links_[static_cast<std::size_t>(r)].valid()) {
        throw LinkError(fmt::format("a connection introduced itself as rank {} of a world of {}; expected one of "
                                    "ranks 1 to {} of {}, each once",
                                    r, hello.bytes, size() - 1, size()));
      }
      links_[static_cast<std::size_t>(r)] = std::move(link);
    }
  }

  void connect_to_hub(kiln::Store& store, Clock::time_point deadline) {
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const std::vector<std::uint8_t> value = store.get(hub_key(), remaining);  // CommError if rank 0 never came
    hub_address_.assign(value.begin(), value.end());
    const auto colon = hub_address_.rfind(':');
    unsigned port = 0;
    const char* digits = hub_address_.c_str() + (colon == std::string::npos ? 0 : colon + 1);
    if (colon == std::string::npos || std::sscanf(digits, "%5u", &port) != 1 || port == 0 || port > 65535) {
      throw LinkError(fmt::format("the store's '{}' holds '{}', not host:port (another job using the same store?)",
                                  hub_key(), hub_address_));
    }
    links_[0] = kiln::sdk::tcp_connect(hub_address_.substr(0, colon), static_cast<std::uint16_t>(port), deadline);
    const Header hello{0, static_cast<std::uint32_t>(OpCode::hello), rank(), static_cast<std::uint64_t>(size())};
    links_[0].send_all(&hello, sizeof hello, deadline);
  }

  static std::string hostname() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
  }

  std::string missing_ranks() const {
    std::string list;
    for (int r = 1; r < size(); ++r) {
      if (!links_[static_cast<std::size_t>(r)].valid()) list += (list.empty() ? "rank " : ", ") + std::to_string(r);
    }
    return fmt::format("{} of {}", list, size());
  }

  // ---- the worker: collectives run one at a time, in issue order ----

  std::unique_ptr<kiln::Work> submit(OpCode op, Job job) {
    std::future<void> done;
    {
      // Numbered and queued under one lock, so the queue's order is the sequence numbers'.
      const std::lock_guard lock(mutex_);
      if (!failure_.empty()) throw kiln::CommError("star: the communicator failed earlier and is unusable: " + failure_);
      const std::uint64_t seq = next_seq_++;
      std::packaged_task<void()> task([this, op, seq, job = std::move(job)] { run(op, seq, job); });
      done = task.get_future();
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
    return std::make_unique<FutureWork>(std::move(done));
  }

  void work() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  /// Runs one collective; any failure becomes a CommError naming it, and ends the communicator.
  void run(OpCode op, std::uint64_t seq, const Job& job) {
    {
      const std::lock_guard lock(mutex_);
      if (!failure_.empty()) {
        throw kiln::CommError(fmt::format("star {} #{}: not run, an earlier collective failed: {}", op_name(op), seq,
                                          failure_));
      }
    }
    try {
      job(seq, Clock::now() + timeout_);
    } catch (const std::exception& e) {
      const std::string what =
          aborted_ ? "the communicator was aborted" : fmt::format("{} (timeout {} s)", e.what(), timeout_.count() / 1000.0);
      const std::string message = fmt::format("star {} #{} on rank {} of {}: {}", op_name(op), seq, rank(), size(), what);
      {
        const std::lock_guard lock(mutex_);
        failure_ = message;
      }
      abort();  // the others see their connection close and fail at once
      throw kiln::CommError(message);
    }
  }

  /// Sends a header and `bytes` to rank `to`; LinkErrors name the peer.
  void send(int to, std::uint64_t seq, OpCode op, const void* data, std::size_t bytes, Clock::time_point deadline) {
    const Header h{seq, static_cast<std::uint32_t>(op), rank(), bytes};
    const Link& link = links_[static_cast<std::size_t>(to)];
    try {
      link.send_all(&h, sizeof h, deadline);
      link.send_all(data, bytes, deadline);
    } catch (const LinkError& e) {
      throw LinkError(fmt::format("sending to rank {}: {}", to, e.what()));
    }
  }

  /// Receives rank `from`'s message for collective `seq` into `data`, after checking its header.
  void receive(int from, std::uint64_t seq, OpCode op, void* data, std::size_t bytes, Clock::time_point deadline) {
    const Link& link = links_[static_cast<std::size_t>(from)];
    Header h;
    try {
      link.recv_all(&h, sizeof h, deadline);
    } catch (const LinkError& e) {
      throw LinkError(fmt::format("rank {} did not send its part: {}", from, e.what()));
    }
    if (h.seq != seq || h.op != static_cast<std::uint32_t>(op) || h.bytes != bytes) {
      throw LinkError(fmt::format("rank {} sent {} #{} of {} bytes where {} #{} of {} bytes was expected: every rank "
                                  "must call the same collectives in the same order with the same sizes",
                                  from, op_name(static_cast<OpCode>(h.op)), h.seq, h.bytes, op_name(op), seq, bytes));
    }
    try {
      link.recv_all(data, bytes, deadline);
    } catch (const LinkError& e) {
      throw LinkError(fmt::format("receiving from rank {}: {}", from, e.what()));
    }
  }

  /// Rank 0: t = op over every rank's t, combined in rank order (so the result does not depend
  /// on who arrived first). 16-bit types are combined in f32 and rounded once at the end.
  void reduce_on_hub(const kiln::Tensor& t, kiln::ReduceOp op, std::uint64_t seq, Clock::time_point deadline) {
    const auto n = static_cast<std::size_t>(t.numel());
    std::vector<std::uint8_t> part(t.bytes());
    const auto each_part = [&](auto&& add) {
      for (int r = 1; r < size(); ++r) {
        receive(r, seq, OpCode::all_reduce, part.data(), part.size(), deadline);
        add();
      }
    };
    const auto divisor = static_cast<float>(size());
    switch (t.dtype()) {
      case kiln::DType::f32: {
        auto* acc = t.data_as<float>();
        each_part([&] { combine(acc, reinterpret_cast<const float*>(part.data()), n, op); });
        if (op == kiln::ReduceOp::avg) for (std::size_t i = 0; i < n; ++i) acc[i] /= divisor;
        break;
      }
      case kiln::DType::f64: {
        auto* acc = t.data_as<double>();
        each_part([&] { combine(acc, reinterpret_cast<const double*>(part.data()), n, op); });
        if (op == kiln::ReduceOp::avg) for (std::size_t i = 0; i < n; ++i) acc[i] /= size();
        break;
      }
      default: {  // f16, bf16
        const bool f16 = t.dtype() == kiln::DType::f16;
        const auto widen = [&](const std::uint16_t* in, float* out) {
          f16 ? kiln::sdk::f16_to_f32(in, out, n) : kiln::sdk::bf16_to_f32(in, out, n);
        };
        std::vector<float> acc(n), x(n);
        widen(t.data_as<std::uint16_t>(), acc.data());
        each_part([&] {
          widen(reinterpret_cast<const std::uint16_t*>(part.data()), x.data());
          combine(acc.data(), x.data(), n, op);
        });
        if (op == kiln::ReduceOp::avg) for (float& v : acc) v /= divisor;
        f16 ? kiln::sdk::f32_to_f16(acc.data(), t.data_as<std::uint16_t>(), n)
            : kiln::sdk::f32_to_bf16(acc.data(), t.data_as<std::uint16_t>(), n);
      }
    }
  }

  std::string host_;
  kiln::RankInfo ranks_;
  std::chrono::milliseconds timeout_{0};
  std::string hub_address_;
  std::vector<Link> links_;  ///< rank 0: one per other rank (links_[0] unused); others: links_[0], the hub
  std::atomic<bool> aborted_{false};

  std::mutex mutex_;  ///< guards the queue, the sequence counter, `failure_` and `stopping_`
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  std::uint64_t next_seq_ = 0;
  std::string failure_;  ///< the first error; the communicator is unusable after it
  bool stopping_ = false;
  std::thread worker_;

  std::shared_ptr<const kiln::log::Logger> log_ = kiln::log::get("star");
};

constexpr kiln_param_spec_v1 kStarParams[] = {
    {"host", KILN_PARAM_STRING, "\"\"", nullptr,
     "Address the other ranks reach rank 0 at. Empty: 127.0.0.1 when every rank is on one machine, "
     "else rank 0's host name."},
};

}  // namespace star

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Communicator, star::StarCommunicator>(
    "star", "0.1.0", "All-reduce through rank 0 over TCP: a sample communicator", star::kStarParams));
