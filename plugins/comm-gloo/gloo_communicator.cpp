// GlooCommunicator: rendezvous, queueing and error wording (see gloo_communicator.hpp).
#include "gloo_communicator.hpp"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/address.h>

#include <fmt/format.h>

#include <exception>

#include <signal.h>
#include <unistd.h>

#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/store.hpp"
#include "peer_directory.hpp"
#include "store_adapter.hpp"

namespace kiln::gloo_comm {
namespace {

Algorithm parse_algorithm(const ParamMap& params) {
  const std::string& text = params.get_string("algorithm");
  if (text == "ring") return Algorithm::ring;
  if (text == "ring_chunked") return Algorithm::ring_chunked;
  if (text == "halving_doubling") return Algorithm::halving_doubling;
  if (text == "bcube") return Algorithm::bcube;
  throw ConfigError(fmt::format("{} = \"{}\" is not a gloo algorithm; choose ring, ring_chunked, "
                                "halving_doubling or bcube", params.where("algorithm"), text));
}

bool is_power_of(int n, int base) {
  while (n > 1 && n % base == 0) n /= base;
  return n == 1;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return fmt::format("{} s", ms.count() / 1000);
  return fmt::format("{:.3g} s", static_cast<double>(ms.count()) / 1000.0);
}

/// Blocks SIGPIPE in the calling thread for its lifetime. connect() holds one, so Gloo's
/// socket threads and the communication thread, all started inside connect(), inherit the
/// blocked mask: a write to a peer that died then fails with EPIPE (and becomes a CommError
/// naming it) instead of killing this rank silently with SIGPIPE. Other threads are untouched.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe, &saved_);
  }
  ~SigpipeBlocked() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t saved_{};
};

/// Rank r's listening address for its pair with us, as Gloo prints it in socket errors
/// ("[ip]:port"; "" if unknown). Read back from Gloo's full-mesh rendezvous value: rank r
/// publishes one fixed-size address per peer in rank order, skipping itself (Gloo's
/// Context::extractAddress). tcp/pair.h cannot be included (Debian lacks a header it needs),
/// so the pairs' own peer() cannot be asked.
std::vector<std::string> pair_addresses(kiln::Store& store, const std::string& prefix, int self, int world,
                                        std::chrono::milliseconds timeout) {
  std::vector<std::string> out(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    if (r == self) continue;
    try {
      const auto all = store.get(fmt::format("{}/rank{}", prefix, r), timeout);
      if (all.empty() || all.size() % static_cast<std::size_t>(world - 1) != 0) continue;
      const std::size_t size = all.size() / static_cast<std::size_t>(world - 1);
      const std::size_t at = static_cast<std::size_t>(self > r ? self - 1 : self) * size;
      const ::gloo::transport::tcp::Address address(std::vector<char>(all.begin() + static_cast<std::ptrdiff_t>(at),
                                                                       all.begin() + static_cast<std::ptrdiff_t>(at + size)));
      std::string text = address.str();
      if (const auto dollar = text.find('$'); dollar != std::string::npos) text.resize(dollar);
      out[static_cast<std::size_t>(r)] = text;
    } catch (const std::exception&) {
      // Only a second signal for error messages; without it a dead peer is still found by pid.
    }
  }
  return out;
}

/// The host of a Gloo address text ("10.0.0.5:41235" -> "10.0.0.5", "[fe80::1]:41235" -> "fe80::1").
std::string host_of(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return "";
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

std::int64_t GlooCommunicator::star_limit() const {
  // The hub receives and sends (ranks - 1) copies: the limit is on that traffic.
  return star_max_bytes_ / std::max(1, ranks_.world_size - 1);
}

GlooCommunicator::GlooCommunicator(const PluginArgs& args) : ranks_(args.ranks) {
  static const ParamMap empty("comm");
  const ParamMap& params = args.params ? *args.params : empty;
  algorithm_ = parse_algorithm(params);
  interface_ = params.get_string("interface");
  // 2..64 ranks per bcube step: the schema's range (plugin.cpp), checked by the core.
  bcube_base_ = static_cast<int>(params.get_int("bcube_base"));
  star_max_bytes_ = params.get_int("star_max_bytes");
}

GlooCommunicator::~GlooCommunicator() {
  // The queue first: its thread may still be inside a collective that uses the engine.
  queue_.reset();
}

std::string GlooCommunicator::timeout_text() const { return seconds_text(timeout_); }

void GlooCommunicator::connect(const CommContext& ctx) {
  if (engine_) throw CommError("gloo communicator connect() called twice; connect once per run");
  if (ctx.store == nullptr) {
    throw CommError("gloo connect() needs a rendezvous store (CommContext::store is null)");
  }
  const SigpipeBlocked sigpipe_blocked;
  ranks_ = ctx.ranks;
  timeout_ = ctx.timeout;
  const int world = ranks_.world_size;
  if (algorithm_ == Algorithm::bcube && !is_power_of(world, bcube_base_)) {
    throw ConfigError(fmt::format(
        "comm.algorithm = \"bcube\" with bcube_base = {} needs a world size that is a power of "
        "{} (Gloo's bcube exchanges within groups of bcube_base ranks at every step), but the "
        "world has {} ranks; use ring, ring_chunked or halving_doubling, or change bcube_base",
        bcube_base_, bcube_base_, world));
  }
  auto logger = log::get("gloo");

  // Every rank announces itself first, so a missing peer is reported with all the others
  // ("waiting for ranks 3, 5 of 8") instead of whichever one Gloo happens to ask for first.
  // Each rank's process identity goes in first, so that once everyone has arrived a failed
  // collective can later tell which peer's process is gone (PeerDirectory).
  const std::string prefix = "gloo";
  ctx.store->set(fmt::format("{}/process/rank{}", prefix, ranks_.rank), ProcessIdentity::self().encode());
  ctx.store->set(fmt::format("{}/arrive/rank{}", prefix, ranks_.rank), {1});
  std::vector<std::string> arrivals;
  for (int r = 0; r < world; ++r) arrivals.push_back(fmt::format("{}/arrive/rank{}", prefix, r));
  ctx.store->wait(arrivals, timeout_);
  std::vector<ProcessIdentity> processes;
  for (int r = 0; r < world; ++r) {
    processes.push_back(ProcessIdentity::decode(ctx.store->get(fmt::format("{}/process/rank{}", prefix, r), timeout_)));
  }

  ::gloo::transport::tcp::attr attr;
  if (!interface_.empty()) attr.iface = interface_;
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError(fmt::format(
        "gloo could not open a TCP device on {}: {}; set comm.interface to an existing network "
        "interface (\"lo\" for one machine)",
        interface_.empty() ? std::string("this host's name") : "interface '" + interface_ + "'", e.what()));
  }
  device_text_ = interface_.empty() ? "host " + host_name() : interface_;

  auto context = std::make_shared<::gloo::rendezvous::Context>(ranks_.rank, world, bcube_base_);
  context->setTimeout(timeout_);
  StoreAdapter store(*ctx.store, prefix, timeout_);
  try {
    context->connectFullMesh(store, device);
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(fmt::format(
        "gloo rendezvous failed on rank {} of {}: {}; a peer may have died, or its address is not "
        "reachable from here (check comm.interface; timeout {})",
        ranks_.rank, world, e.what(), timeout_text()));
  }
  std::vector<std::string> addresses = pair_addresses(*ctx.store, prefix, ranks_.rank, world, timeout_);
  if (world > 1 && star_max_bytes_ > 0) {
    // The others reach rank 0 at the address Gloo reaches it at.
    const std::string hub_host = ranks_.rank == 0 ? std::string() : host_of(addresses[0]);
    if (ranks_.rank != 0 && hub_host.empty()) {
      throw CommError(fmt::format("gloo on rank {} of {} cannot tell rank 0's address for the star path ('{}'); "
                                  "set comm.star_max_bytes = 0 to send every all-reduce through Gloo",
                                  ranks_.rank, world, addresses[0]));
    }
    star_ = std::make_shared<StarPath>(*ctx.store, prefix, ranks_.rank, world, hub_host, timeout_);
  }
  peers_ = std::make_shared<const PeerDirectory>(ranks_.rank, std::move(processes), std::move(addresses));
  engine_ = std::make_shared<Engine>(std::move(context), algorithm_, timeout_);
  queue_ = std::make_unique<CommQueue>();
  logger->info("gloo connected: rank {} of {} (from {}), {} over tcp ({}), timeout {}{}", ranks_.rank,
               world, ranks_.source, algorithm_name(algorithm_), device_text_, timeout_text(),
               star_ ? fmt::format("; star to {} for all-reduces up to {} bytes", star_->hub(), star_limit()) : "");
}

std::string GlooCommunicator::describe() const {
  std::string text = fmt::format("gloo {} over tcp ({})", algorithm_name(algorithm_),
                                 device_text_.empty() ? (interface_.empty() ? "hostname" : interface_)
                                                      : device_text_);
  if (algorithm_ == Algorithm::bcube) text += fmt::format(", base {}", bcube_base_);
  if (star_) text += fmt::format("; a star to rank 0 for all-reduces up to {} bytes", star_limit());
  return text;
}

void GlooCommunicator::require_connected(std::string_view op) const {
  if (!engine_) {
    throw CommError(fmt::format("gloo {} called before connect(); connect the communicator first", op));
  }
}

void GlooCommunicator::require_host(std::string_view op, std::uint64_t seq, const Tensor& t) const {
  if (!t.defined()) throw CommError(fmt::format("gloo {} #{}: the tensor is undefined", op, seq));
  if (t.memory() == MemoryKind::device) {
    throw CommError(fmt::format("gloo {} #{}: {} is in device memory, but gloo works on host "
                                "memory; copy it to the host or use an nccl communicator",
                                op, seq, t.describe()));
  }
  if (t.layout() == Layout::opaque) {
    throw CommError(fmt::format("gloo {} #{}: {} has a backend-private layout; communicate a "
                                "row-major tensor", op, seq, t.describe()));
  }
}

std::unique_ptr<Work> GlooCommunicator::enqueue(std::string_view op, std::uint64_t seq,
                                                std::string what, std::function<void(Engine&)> body) {
  const std::string label = fmt::format("{} #{} ({})", op, seq, what);
  // The task owns what it touches (engine, tensors) so that an abandoned thread stays safe.
  auto engine = engine_;
  const int rank = ranks_.rank;
  const int world = ranks_.world_size;
  const std::string timeout = timeout_text();
  auto peers = peers_;
  // A failure names the rank(s) found gone (or whose connection failed) ahead of Gloo's text.
  auto run = [engine, peers, body = std::move(body), label, rank, world, timeout] {
    const auto fail = [&](std::string_view gloo_text, std::string_view tail) {
      const std::string culprits = peers ? peers->explain(gloo_text) : std::string();
      if (culprits.empty()) {
        return CommError(fmt::format("gloo {} failed on rank {} of {}: {}{}{}", label, rank, world, gloo_text, tail,
                                     tail.empty() ? "" : " (could not tell which peer)"));
      }
      return CommError(fmt::format("gloo {} failed on rank {} of {}: {}: {}{}", label, rank, world, culprits,
                                   gloo_text, tail));
    };
    try {
      body(*engine);
    } catch (const CommError& e) {
      throw fail(e.what(), "");
    } catch (const std::exception& e) {
      throw fail(e.what(), fmt::format("; a peer may have died or timed out (timeout {})", timeout));
    }
  };
  return std::make_unique<QueuedWork>(queue_->submit(std::move(run), label));
}

std::unique_ptr<Work> GlooCommunicator::all_reduce(const Tensor& t, ReduceOp op) {
  require_connected("all_reduce");
  const std::uint64_t seq = next_seq_++;
  require_host("all_reduce", seq, t);
  const DType dtype = t.dtype();
  if (dtype != DType::f32 && dtype != DType::f64 && dtype != DType::f16 && dtype != DType::bf16) {
    throw CommError(fmt::format("gloo all_reduce #{}: {} is not supported; gloo reduces f32, f64, "
                                "f16 and bf16", seq, t.describe()));
  }
  const auto count = static_cast<std::size_t>(t.numel());
  if (star_ && static_cast<std::int64_t>(t.bytes()) <= star_limit()) {
    auto star = star_;
    return enqueue("all_reduce", seq, fmt::format("{} x {}, star", dtype_name(dtype), count),
                   [star, t, dtype, count, op, seq](Engine&) { star->all_reduce(t.data(), dtype, count, op, seq); });
  }
  const auto tag = static_cast<std::uint32_t>(seq);
  return enqueue("all_reduce", seq,
                 fmt::format("{} x {}, {}", dtype_name(dtype), count, algorithm_name(algorithm_)),
                 [t, dtype, count, op, tag](Engine& e) { e.all_reduce(t.data(), dtype, count, op, tag); });
}

std::unique_ptr<Work> GlooCommunicator::broadcast(const Tensor& t, int root) {
  require_connected("broadcast");
  const std::uint64_t seq = next_seq_++;
  require_host("broadcast", seq, t);
  if (root < 0 || root >= ranks_.world_size) {
    throw CommError(fmt::format("gloo broadcast #{}: root {} is not a rank of a world of {}", seq,
                                root, ranks_.world_size));
  }
  const auto tag = static_cast<std::uint32_t>(seq);
  return enqueue("broadcast", seq,
                 fmt::format("{} x {}, root {}", dtype_name(t.dtype()), t.numel(), root),
                 [t, root, tag](Engine& e) { e.broadcast(t.data(), t.bytes(), root, tag); });
}

std::unique_ptr<Work> GlooCommunicator::all_gather(const Tensor& out, const Tensor& in) {
  require_connected("all_gather");
  const std::uint64_t seq = next_seq_++;
  require_host("all_gather", seq, out);
  require_host("all_gather", seq, in);
  if (out.dtype() != in.dtype() || out.numel() != in.numel() * ranks_.world_size) {
    throw CommError(fmt::format("gloo all_gather #{}: out {} must hold {} x {} (world size x in "
                                "{})", seq, out.describe(), ranks_.world_size, in.numel(),
                                in.describe()));
  }
  const auto tag = static_cast<std::uint32_t>(seq);
  return enqueue("all_gather", seq, fmt::format("{} x {}", dtype_name(in.dtype()), in.numel()),
                 [out, in, tag](Engine& e) { e.all_gather(out.data(), in.data(), in.bytes(), tag); });
}

void GlooCommunicator::barrier() {
  require_connected("barrier");
  const std::uint64_t seq = next_seq_++;
  const auto tag = static_cast<std::uint32_t>(seq);
  enqueue("barrier", seq, "no data", [tag](Engine& e) { e.barrier(tag); })->wait();
}

void GlooCommunicator::abort() noexcept {
  if (!queue_) return;
  auto engine = engine_;
  auto star = star_;
  if (!queue_->abort([engine, star] {
        engine->close_connections();
        if (star) star->close_connections();
      })) {
    return;
  }
  try {
    log::get("gloo")->warn("gloo communicator aborted on rank {} of {}", ranks_.rank, ranks_.world_size);
  } catch (...) {
  }
}

}  // namespace kiln::gloo_comm
