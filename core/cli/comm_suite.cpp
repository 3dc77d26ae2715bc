// The communicator conformance suite (see comm_suite.hpp).
#include "comm_suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <thread>

#include "kiln/dist/reduce_op_name.hpp"

namespace kiln::cli {
namespace {

constexpr std::int64_t kMultiSegment = 1000003;  // > 1 MiB segments for every dtype, and odd

/// Small integers in [-5, 5]; every partial sum over <= 8 ranks is exact in f16/bf16.
double small_int(std::int64_t i, int rank) { return static_cast<double>((i * 7 + rank * 3 + 1) % 11) - 5.0; }

using Comms = std::vector<std::shared_ptr<Communicator>>;

/// Counts mismatches of `got` against `want` for one rank, keeping the first as `detail`.
void tally(CaseResult& result, int rank, const std::vector<double>& got, const std::vector<double>& want) {
  result.checked += static_cast<std::int64_t>(want.size());
  if (got.size() != want.size()) {
    result.wrong += static_cast<std::int64_t>(want.size());
    if (result.detail.empty()) {
      result.detail = fmt::format("rank {}: {} elements, want {}", rank, got.size(), want.size());
    }
    return;
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool same = got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!same) {
      if (result.wrong == 0 && result.detail.empty()) {
        result.detail = fmt::format("rank {} [{}]: got {}, want {}", rank, i, got[i], want[i]);
      }
      ++result.wrong;
    }
  }
}

void record_errors(CaseResult& result, const std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r].empty() && result.detail.empty()) {
      result.detail = fmt::format("rank {} threw: {}", r, errors[r]);
    }
  }
}

/// The cases, run for the ranks `placement` hosts in this process. Inputs and expected values
/// are computed from (index, rank) formulas, so each process builds only its own ranks'.
class Suite {
 public:
  Suite(const CommSuiteSpec& spec, const RankPlacement& placement, Backend& backend, Comms comms)
      : spec_(spec), placement_(placement), backend_(backend), world_(placement.world), comms_(std::move(comms)) {}

  CaseResult all_reduce(DType dtype, std::int64_t count, ReduceOp op) {
    CaseResult result = begin(fmt::format("all_reduce {} x {} {}", dtype_name(dtype), count, dist::reduce_op_name(op)));
    // avg: inputs are multiples of the world size, so the mean is an exact small integer.
    const double scale = op == ReduceOp::avg ? world_ : 1.0;
    std::vector<Tensor> tensors(static_cast<std::size_t>(world_));
    for (const int r : placement_.local) {
      std::vector<double> v(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = scale * small_int(i, r);
      tensors[static_cast<std::size_t>(r)] = make(v, dtype);
    }
    std::vector<double> want(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      double acc = op == ReduceOp::max ? -1e30 : op == ReduceOp::min ? 1e30 : 0.0;
      for (int r = 0; r < world_; ++r) {
        const double x = small_int(i, r);
        if (op == ReduceOp::max) acc = std::max(acc, x);
        else if (op == ReduceOp::min) acc = std::min(acc, x);
        else acc += x;
      }
      want[static_cast<std::size_t>(i)] = acc;
    }
    record_errors(result, run([&](int r) {
      comms_[static_cast<std::size_t>(r)]->all_reduce(tensors[static_cast<std::size_t>(r)], op)->wait();
    }));
    for (const int r : placement_.local) tally(result, r, read(tensors[static_cast<std::size_t>(r)]), want);
    return result;
  }

  /// Non-integer inputs: the sums are rounded, but every rank must hold the same bits, and
  /// they must be close to the exact sum.
  CaseResult identical_sums(DType dtype, std::int64_t count) {
    CaseResult result = begin(fmt::format("all_reduce {} x {} sum, bit-identical on every rank", dtype_name(dtype), count));
    std::vector<Tensor> tensors(static_cast<std::size_t>(world_));
    std::vector<double> exact(static_cast<std::size_t>(count), 0.0);
    for (int r = 0; r < world_; ++r) {
      std::vector<double> v(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = std::sin(0.37 * i + 1.3 * r + 0.1) * 3.1;
      // Every rank's stored (rounded) input enters the exact sum; only local ranks keep a tensor.
      const Tensor t = make(v, dtype);
      const auto stored = read(t);
      for (std::size_t i = 0; i < stored.size(); ++i) exact[i] += stored[i];
      if (placement_.hosts(r)) tensors[static_cast<std::size_t>(r)] = t;
    }
    record_errors(result, run([&](int r) {
      comms_[static_cast<std::size_t>(r)]->all_reduce(tensors[static_cast<std::size_t>(r)], ReduceOp::sum)->wait();
    }));
    const auto first = placement_.from_rank0(placement_.hosts(0) ? read(tensors[0]) : std::vector<double>());
    for (const int r : placement_.local) {
      if (r != 0) tally(result, r, read(tensors[static_cast<std::size_t>(r)]), first);
    }
    // Closeness to the exact sum (f32: a few ulps of the largest partial sum; half types: 2^-6).
    const double tol = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : 0.08;
    const double bound = tol * 3.1 * world_ + 1e-300;
    for (std::size_t i = 0; i < first.size(); ++i) {
      result.checked += 1;
      if (!(std::abs(first[i] - exact[i]) <= bound)) {
        if (result.detail.empty()) {
          result.detail = fmt::format("[{}]: got {}, exact sum {} (tolerance {})", i, first[i], exact[i], bound);
        }
        ++result.wrong;
      }
    }
    return result;
  }

  CaseResult broadcast(DType dtype, std::int64_t count, int root) {
    CaseResult result = begin(fmt::format("broadcast {} x {} root {}", dtype_name(dtype), count, root));
    std::vector<double> payload(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) payload[static_cast<std::size_t>(i)] = static_cast<double>((i * 5 + root) % 13) - 6.0;
    std::vector<Tensor> tensors(static_cast<std::size_t>(world_));
    for (const int r : placement_.local) {
      tensors[static_cast<std::size_t>(r)] =
          r == root ? make(payload, dtype)
                    : make(std::vector<double>(static_cast<std::size_t>(count), 99.0), dtype);
    }
    record_errors(result, run([&](int r) {
      comms_[static_cast<std::size_t>(r)]->broadcast(tensors[static_cast<std::size_t>(r)], root)->wait();
    }));
    for (const int r : placement_.local) tally(result, r, read(tensors[static_cast<std::size_t>(r)]), payload);
    return result;
  }

  CaseResult all_gather(DType dtype, std::int64_t count) {
    CaseResult result = begin(fmt::format("all_gather {} x {}", dtype_name(dtype), count));
    std::vector<Tensor> ins(static_cast<std::size_t>(world_));
    std::vector<Tensor> outs(static_cast<std::size_t>(world_));
    std::vector<double> want;
    for (int r = 0; r < world_; ++r) {
      std::vector<double> v(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>((i * 3 + r * 7) % 17);  // >= 0: u8 too
      want.insert(want.end(), v.begin(), v.end());
      if (!placement_.hosts(r)) continue;
      ins[static_cast<std::size_t>(r)] = make(v, dtype);
      outs[static_cast<std::size_t>(r)] = make(std::vector<double>(static_cast<std::size_t>(count * world_), 99.0), dtype);
    }
    record_errors(result, run([&](int r) {
      const auto i = static_cast<std::size_t>(r);
      comms_[i]->all_gather(outs[i], ins[i])->wait();
    }));
    for (const int r : placement_.local) tally(result, r, read(outs[static_cast<std::size_t>(r)]), want);
    return result;
  }

  /// Each rank counts itself in before every barrier; after barrier k everyone must see all
  /// world ranks counted in for round k. Values, not timings.
  CaseResult barrier(int rounds) {
    CaseResult result = begin(fmt::format("barrier x {}", rounds));
    std::vector<std::vector<double>> seen(static_cast<std::size_t>(world_));
    record_errors(result, run([&](int r) {
      for (int k = 0; k < rounds; ++k) {
        placement_.arrive(r, k);
        comms_[static_cast<std::size_t>(r)]->barrier();
        seen[static_cast<std::size_t>(r)].push_back(placement_.arrived(k) == world_ ? 1.0 : 0.0);
      }
    }));
    for (const int r : placement_.local) {
      tally(result, r, seen[static_cast<std::size_t>(r)], std::vector<double>(static_cast<std::size_t>(rounds), 1.0));
    }
    return result;
  }

  /// Three all_reduces issued back to back and waited last-first: they must run in issue order
  /// on every rank and each must hold its own result.
  CaseResult in_flight() {
    CaseResult result = begin("3 all_reduces in flight");
    const DType half = spec_.dtypes.back();
    struct Op {
      DType dtype;
      std::int64_t count;
      ReduceOp op;
    };
    const Op plan[3] = {{DType::f32, 7, ReduceOp::sum}, {half, 1000, ReduceOp::max}, {DType::f32, 100003, ReduceOp::sum}};
    std::vector<std::vector<Tensor>> tensors(3, std::vector<Tensor>(static_cast<std::size_t>(world_)));
    std::vector<std::vector<double>> want(3);
    for (int k = 0; k < 3; ++k) {
      want[k].resize(static_cast<std::size_t>(plan[k].count));
      for (int r = 0; r < world_; ++r) {
        std::vector<double> v(static_cast<std::size_t>(plan[k].count));
        for (std::int64_t i = 0; i < plan[k].count; ++i) {
          const double x = small_int(i + k, r);
          v[static_cast<std::size_t>(i)] = x;
          double& w = want[k][static_cast<std::size_t>(i)];
          w = plan[k].op == ReduceOp::max ? (r == 0 ? x : std::max(w, x)) : (r == 0 ? x : w + x);
        }
        if (placement_.hosts(r)) tensors[k][static_cast<std::size_t>(r)] = make(v, plan[k].dtype);
      }
    }
    record_errors(result, run([&](int r) {
      const auto i = static_cast<std::size_t>(r);
      auto a = comms_[i]->all_reduce(tensors[0][i], plan[0].op);
      auto b = comms_[i]->all_reduce(tensors[1][i], plan[1].op);
      auto c = comms_[i]->all_reduce(tensors[2][i], plan[2].op);
      c->wait();
      a->wait();
      b->wait();
    }));
    for (int k = 0; k < 3; ++k) {
      for (const int r : placement_.local) tally(result, r, read(tensors[k][static_cast<std::size_t>(r)]), want[k]);
    }
    return result;
  }

  std::vector<CaseResult> run_all() {
    std::vector<CaseResult> results;
    for (const DType dtype : spec_.dtypes) {
      for (const ReduceOp op : spec_.ops) {
        for (const std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}}) {
          results.push_back(all_reduce(dtype, count, op));
        }
      }
      // Multi-segment: sum for every dtype, and avg once (f32) -- the big cases dominate runtime.
      results.push_back(all_reduce(dtype, kMultiSegment, ReduceOp::sum));
      if (dtype == DType::f32) results.push_back(all_reduce(dtype, kMultiSegment, ReduceOp::avg));
      results.push_back(identical_sums(dtype, 4099));
    }
    for (const int root : {0, world_ - 1}) {
      for (const std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, kMultiSegment}) {
        results.push_back(broadcast(DType::f32, count, root));
      }
      results.push_back(broadcast(DType::bf16, 7, root));
      results.push_back(broadcast(DType::i64, 7, root));
      if (world_ == 1) break;
    }
    for (const std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, std::int64_t{100003}}) {
      results.push_back(all_gather(DType::f32, count));
    }
    results.push_back(all_gather(DType::f16, 7));
    results.push_back(all_gather(DType::u8, 7));
    results.push_back(barrier(3));
    results.push_back(in_flight());
    return results;
  }

 private:
  /// A case's result, empty; tells spec_.on_case that the case starts.
  CaseResult begin(std::string name) const {
    if (spec_.on_case) spec_.on_case(name);
    return CaseResult{std::move(name)};
  }
  /// Runs body(rank) for every local rank; errors indexed by rank ("" where none or not local).
  std::vector<std::string> run(const std::function<void(int rank)>& body) const { return placement_.run(body); }
  Tensor make(const std::vector<double>& values, DType dtype) const { return make_host_tensor(backend_, values, dtype); }
  std::vector<double> read(const Tensor& t) const { return read_host_values(backend_, t); }

  const CommSuiteSpec& spec_;
  const RankPlacement& placement_;
  Backend& backend_;
  int world_;
  Comms comms_;
};

}  // namespace

bool RankPlacement::hosts(int rank) const { return std::find(local.begin(), local.end(), rank) != local.end(); }

std::vector<std::string> run_ranks(int world, const std::function<void(int rank)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = std::string(e.what()).empty() ? "<empty message>" : e.what();
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = "<not a std::exception>";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

Tensor make_host_tensor(Backend& backend, const std::vector<double>& values, DType dtype) {
  const Shape shape{static_cast<std::int64_t>(values.size())};
  Tensor out = backend.allocate(shape, dtype, MemoryKind::host);
  const auto fill = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  };
  switch (dtype) {
    case DType::f64: fill(out.data_as<double>()); break;
    case DType::f32:
    case DType::f16:
    case DType::bf16: {
      Tensor f = backend.allocate(shape, DType::f32, MemoryKind::host);
      fill(f.data_as<float>());
      if (dtype == DType::f32) return f;
      if (!values.empty()) backend.cast(out, f);
      break;
    }
    case DType::i32: fill(out.data_as<std::int32_t>()); break;
    case DType::i64: fill(out.data_as<std::int64_t>()); break;
    case DType::u8: fill(out.data_as<std::uint8_t>()); break;
  }
  return out;
}

std::vector<double> read_host_values(Backend& backend, const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<double> out(n);
  const auto widen = [&](const auto* p) {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<double>(p[i]);
  };
  switch (t.dtype()) {
    case DType::f64: widen(t.data_as<double>()); break;
    case DType::f32:
    case DType::f16:
    case DType::bf16: {
      Tensor f = t;
      if (t.dtype() != DType::f32) {
        f = backend.allocate(t.shape(), DType::f32, MemoryKind::host);
        if (n > 0) backend.cast(f, t);
      }
      widen(f.data_as<float>());
      break;
    }
    case DType::i32: widen(t.data_as<std::int32_t>()); break;
    case DType::i64: widen(t.data_as<std::int64_t>()); break;
    case DType::u8: widen(t.data_as<std::uint8_t>()); break;
  }
  return out;
}

RankInfo rank_of(int r, int world, const std::string& source) {
  RankInfo ranks;
  ranks.rank = r;
  ranks.world_size = world;
  ranks.local_rank = r;
  ranks.local_world_size = world;
  ranks.source = source;
  return ranks;
}

RankPlacement threads_in_this_process(int world) {
  RankPlacement p;
  p.world = world;
  for (int r = 0; r < world; ++r) p.local.push_back(r);
  p.run = [world](const std::function<void(int)>& body) { return run_ranks(world, body); };
  p.from_rank0 = [](const std::vector<double>& mine) { return mine; };
  // One counter per barrier round, shared by the rank threads.
  auto counts = std::make_shared<std::vector<std::atomic<int>>>(64);
  p.arrive = [counts](int /*rank*/, int round) { (*counts).at(static_cast<std::size_t>(round)).fetch_add(1); };
  p.arrived = [counts](int round) { return (*counts).at(static_cast<std::size_t>(round)).load(); };
  p.merge = [](std::vector<CaseResult>&) {};
  return p;
}

std::vector<CaseResult> run_comm_suite(const CommSuiteSpec& spec, const RankPlacement& placement, Store* store,
                                       Backend& backend, std::chrono::milliseconds timeout) {
  const int world = placement.world;
  Comms comms(static_cast<std::size_t>(world));
  CaseResult connect{fmt::format("connect {} ranks", world)};
  if (spec.on_case) spec.on_case(connect.name);
  for (const int r : placement.local) {
    try {
      comms[static_cast<std::size_t>(r)] = spec.make(rank_of(r, world, "conformance"));
    } catch (const std::exception& e) {
      connect.detail = fmt::format("making rank {}'s communicator threw: {}", r, e.what());
      return {connect};
    }
  }
  const std::vector<std::string> errors = placement.run([&](int r) {
    CommContext ctx;
    ctx.ranks = rank_of(r, world, "conformance");
    ctx.store = store;
    ctx.backend = &backend;
    ctx.timeout = timeout;
    comms[static_cast<std::size_t>(r)]->connect(ctx);
  });
  record_errors(connect, errors);
  connect.refused = std::all_of(placement.local.begin(), placement.local.end(),
                                [&](int r) { return !errors[static_cast<std::size_t>(r)].empty(); });
  for (const int r : placement.local) {
    const auto& c = *comms[static_cast<std::size_t>(r)];
    if (connect.ok() && (c.rank() != r || c.size() != world)) {
      connect.detail = fmt::format("rank {} reports rank {} of {}", r, c.rank(), c.size());
    }
    if (connect.ok() && !c.accepts(MemoryKind::host)) {
      connect.detail = fmt::format("rank {} does not accept host memory; these cases run on host tensors", r);
    }
  }
  std::vector<CaseResult> results{connect};
  if (connect.ok()) {
    Suite suite(spec, placement, backend, comms);
    auto cases = suite.run_all();
    results.insert(results.end(), cases.begin(), cases.end());
  }
  placement.merge(results);  // while the communicators (and, for MPI, MPI itself) are still up
  return results;
}

}  // namespace kiln::cli
