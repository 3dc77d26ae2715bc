// The communicator checks of `kiln plugins test` (see conformance.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "comm_suite.hpp"
#include "conformance.hpp"
#include "kiln/dist/memory_store.hpp"
#include "kiln/errors.hpp"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kWorlds[] = {1, 2, 3, 4};
// The timeouts are CommCheckTimes' (conformance.hpp). Ranks are threads of this process on
// loopback, so a case is quick (the largest, 1,000,003 floats over 4 ranks, took 0.1 s through
// the sample's star); a case still running the suite's timeout plus the grace after it started
// counts as hung. The grace is a bound on "returns at all", not on speed.
constexpr milliseconds kAbortAfter{300};

double seconds_of(milliseconds d) { return std::chrono::duration<double>(d).count(); }

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// Ranks of one world as threads, with the store they met through; shared, so that a thread
/// left hung in plugin code keeps them alive.
struct World {
  explicit World(int n) : store(n), comms(static_cast<std::size_t>(n)) {}
  dist::MemoryStore store;
  std::vector<std::shared_ptr<Communicator>> comms;
};

CommContext context(World& w, Backend& backend, int rank, int world, milliseconds timeout) {
  CommContext ctx;
  ctx.ranks = rank_of(rank, world, "kiln plugins test");
  ctx.store = &w.store;
  ctx.backend = &backend;
  ctx.timeout = timeout;
  return ctx;
}

/// Makes and connects `world` ranks; the first rank's error text if any failed.
std::string connect_all(World& w, const CommMaker& make, Backend& backend, milliseconds timeout) {
  const int world = static_cast<int>(w.comms.size());
  for (int r = 0; r < world; ++r) w.comms[static_cast<std::size_t>(r)] = make(rank_of(r, world, "kiln plugins test"));
  const auto errors = run_ranks(world, [&](int r) {
    w.comms[static_cast<std::size_t>(r)]->connect(context(w, backend, r, world, timeout));
  });
  for (int r = 0; r < world; ++r) {
    if (!errors[static_cast<std::size_t>(r)].empty()) return fmt::format("rank {}: {}", r, errors[static_cast<std::size_t>(r)]);
  }
  return {};
}

void abort_all(World& w) {
  for (const auto& c : w.comms) {
    if (c) c->abort();
  }
}

/// How a call watched on a thread of its own came back.
struct Watched {
  bool returned = false;    ///< false: still inside the plugin after abort() and the grace period
  bool comm_error = false;  ///< it threw a CommError
  std::string error;        ///< what it threw ("" = returned normally)
  double seconds = 0;       ///< from start to return
  bool needed_abort = false;
};

/// Runs `body` on a thread of its own and waits up to `limit`; past that calls `rescue` (an
/// abort()), if given, and waits `grace` more. A thread still inside the plugin then is detached
/// and `hung` set: the caller must end the process without unloading the plugin under it.
Watched watch(std::function<void()> body, milliseconds limit, milliseconds grace, const std::function<void()>& rescue,
              bool& hung) {
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    Watched result;
  };
  auto shared = std::make_shared<Shared>();
  const auto start = Clock::now();
  std::thread thread([shared, body = std::move(body), start] {
    Watched w;
    try {
      body();
    } catch (const CommError& e) {
      w.comm_error = true;
      w.error = e.what();
    } catch (const std::exception& e) {
      w.error = std::string("an exception that is not a CommError: ") + e.what();
    } catch (...) {
      w.error = "something that is not a std::exception";
    }
    w.returned = true;
    w.seconds = seconds_since(start);
    const std::lock_guard lock(shared->m);
    shared->result = w;
    shared->done = true;
    shared->cv.notify_all();
  });
  std::unique_lock lock(shared->m);
  bool needed_abort = false;
  if (!shared->cv.wait_for(lock, limit, [&] { return shared->done; })) {
    if (rescue) {
      needed_abort = true;
      lock.unlock();
      rescue();
      lock.lock();
      shared->cv.wait_for(lock, grace, [&] { return shared->done; });
    }
  }
  Watched result = shared->result;
  result.needed_abort = needed_abort;
  const bool done = shared->done;
  lock.unlock();
  if (done) {
    thread.join();
  } else {
    thread.detach();
    hung = true;
  }
  return result;
}

/// Reports the step a watched body starts ("world 2, broadcast f32 x 7 root 1").
using Step = std::function<void(const std::string& name)>;

/// Runs `body` on a thread of its own, watched step by step: a step still running the suite's
/// timeout plus the grace after it started counts as hung (a deadlock in the plugin's own code,
/// which no timeout of its own ends); the thread is then detached, `hung` set, and the step
/// described. Returns "" when `body` finished. Whatever `body` uses must outlive a detached
/// thread: shared state it holds, or what lives until the process ends (the backend, the maker).
std::string run_steps(std::function<void(const Step& step)> body, const CommCheckTimes& times, bool& hung) {
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::string running = "starting";  // the step that started last, and when
    Clock::time_point since = Clock::now();
  };
  auto shared = std::make_shared<Shared>();
  std::thread thread([shared, body = std::move(body)] {
    body([&shared](const std::string& name) {
      const std::lock_guard lock(shared->m);
      shared->running = name;
      shared->since = Clock::now();
    });
    const std::lock_guard lock(shared->m);
    shared->done = true;
    shared->cv.notify_all();
  });
  std::unique_lock lock(shared->m);
  while (!shared->done) {
    shared->cv.wait_for(lock, milliseconds(200));
    if (!shared->done && Clock::now() - shared->since > times.suite + times.grace()) {
      const std::string what = fmt::format("{}: still running {:.0f} s after it started, with a {:g} s timeout",
                                           shared->running, seconds_since(shared->since), seconds_of(times.suite));
      lock.unlock();
      thread.detach();
      hung = true;
      return what;
    }
  }
  lock.unlock();
  thread.join();
  return {};
}

/// A connected world of 2 with `timeout`, or null with `error` set (its ranks aborted).
std::shared_ptr<World> connected_pair(const CommMaker& make, Backend& backend, milliseconds timeout, std::string& error) {
  auto w = std::make_shared<World>(2);
  if (const std::string e = connect_all(*w, make, backend, timeout); !e.empty()) {
    abort_all(*w);
    error = "connecting world 2 failed: " + e;
    return nullptr;
  }
  return w;
}

/// Rank 0 of `w` all-reduces 7 floats and waits while rank 1 calls nothing (see watch); both
/// ranks are aborted afterwards unless the call is still blocked.
Watched all_reduce_on_rank_0(const std::shared_ptr<World>& w, Backend& backend, milliseconds limit, milliseconds grace,
                             const std::function<void()>& rescue, bool& hung) {
  const Tensor t = make_host_tensor(backend, {1, 2, 3, 4, 5, 6, 7}, DType::f32);
  const Watched r = watch([w, t] { w->comms[0]->all_reduce(t, ReduceOp::sum)->wait(); }, limit, grace, rescue, hung);
  if (r.returned) abort_all(*w);
  return r;
}

/// The verdict on a call that must fail with a CommError (`what` names the situation).
Verdict expect_comm_error(const Watched& w, const char* what, milliseconds limit, const CommCheckTimes& times) {
  if (!w.returned) {
    return {false, fmt::format("{}: still blocked {:g} s after abort(), {:g} s in all; a missing rank must end "
                               "in a CommError within the timeout",
                               what, seconds_of(times.grace()), seconds_of(limit + times.grace()))};
  }
  if (w.needed_abort) {
    return {false, fmt::format("{}: blocked past the {:g} s timeout (+{:g} s); only abort() released it "
                               "({})",
                               what, seconds_of(times.short_timeout()), seconds_of(times.grace()),
                               w.error.empty() ? "then it returned normally" : "then: " + w.error)};
  }
  if (w.error.empty()) return {false, fmt::format("{}: returned normally after {:.1f} s", what, w.seconds)};
  if (!w.comm_error) return {false, fmt::format("{}: threw {}", what, w.error)};
  return {true, fmt::format("CommError after {:.1f} s: {}", w.seconds, w.error)};
}

/// The dtypes all_reduce takes: f32 must work; another may be refused, with an error on every
/// rank. Probed in `world` (2, or 1 where a communicator runs only that), a fresh world for each
/// dtype, since a communicator is unusable after an error.
struct Dtypes {
  std::vector<DType> taken;
  std::vector<std::string> refused;  ///< "f64 (the message)"
};

CheckLine probe_dtypes(const CommMaker& make, Backend& backend, int world, milliseconds timeout, Dtypes& out,
                       const Step& step) {
  return run_check("dtypes", [&]() -> Verdict {
    for (const DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
      step(fmt::format("world {}, connect and all_reduce {} x 1 sum (the dtypes probe)", world, dtype_name(dtype)));
      World w(world);
      if (const std::string e = connect_all(w, make, backend, timeout); !e.empty()) {
        return {false, fmt::format("connecting world {} failed: {}", world, e)};
      }
      std::vector<Tensor> tensors;
      for (int r = 0; r < world; ++r) tensors.push_back(make_host_tensor(backend, {1.0}, dtype));
      const auto errors = run_ranks(world, [&](int r) {
        w.comms[static_cast<std::size_t>(r)]->all_reduce(tensors[static_cast<std::size_t>(r)], ReduceOp::sum)->wait();
      });
      const auto failed = static_cast<int>(std::count_if(errors.begin(), errors.end(), [](const auto& e) { return !e.empty(); }));
      if (failed == 0) {
        out.taken.push_back(dtype);
      } else if (failed < world) {
        return {false, fmt::format("all_reduce {} x 1 sum failed on {} of {} ranks: {}", dtype_name(dtype), failed, world,
                                   *std::find_if(errors.begin(), errors.end(), [](const auto& e) { return !e.empty(); }))};
      } else if (dtype == DType::f32) {
        return {false, fmt::format("all_reduce f32 x 1 sum failed; f32 is what training reduces: {}", errors[0])};
      } else {
        out.refused.push_back(fmt::format("{} ({})", dtype_name(dtype), errors[0]));
      }
      abort_all(w);
    }
    std::string taken;
    for (const DType d : out.taken) taken += (taken.empty() ? "" : ", ") + std::string(dtype_name(d));
    std::string text = fmt::format("all_reduce takes {}", taken);
    for (const auto& r : out.refused) text += "; refuses " + r;
    return {true, text};
  });
}

/// The group a suite case belongs to, named as its check line.
std::string group_of(const CaseResult& c) {
  if (c.name.rfind("connect", 0) == 0) return "connect";
  if (c.name.find("bit-identical") != std::string::npos) return "identical";
  if (c.name.rfind("all_reduce", 0) == 0) return "all_reduce";
  if (c.name.rfind("broadcast", 0) == 0) return "broadcast";
  if (c.name.rfind("all_gather", 0) == 0) return "all_gather";
  if (c.name.rfind("barrier", 0) == 0) return "barrier";
  return "in_flight";
}

struct Group {
  std::string name;
  std::string what;  ///< what the cases cover, for the line
  int cases = 0, failed = 0;
  std::int64_t checked = 0, wrong = 0;
  std::string first_failure;
};

/// One line per group over every world the suite ran.
std::vector<CheckLine> suite_lines(const std::vector<std::pair<int, std::vector<CaseResult>>>& runs,
                                   const std::vector<int>& refused_worlds, const std::string& refusal,
                                   const Dtypes& dtypes) {
  std::string types;
  for (const DType d : dtypes.taken) types += (types.empty() ? "" : ", ") + std::string(dtype_name(d));
  std::vector<Group> groups = {
      {"connect", "rank() and size() as given"},
      {"all_reduce", fmt::format("sum, avg, max, min of {} x 0, 1, 7, 1000003 elements", types)},
      {"identical", "sums of non-integers bit-identical on every rank"},
      {"broadcast", "from rank 0 and the last rank"},
      {"all_gather", "in rank order"},
      {"barrier", "nobody leaves before all arrive"},
      {"in_flight", "3 all_reduces issued back to back, waited last first"}};
  std::string worlds;
  for (const auto& [world, results] : runs) {
    worlds += (worlds.empty() ? "" : ", ") + std::to_string(world);
    for (const CaseResult& c : results) {
      Group& g = *std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.name == group_of(c); });
      ++g.cases;
      g.checked += c.checked;
      g.wrong += c.wrong;
      if (!c.ok() && g.failed++ == 0) {
        g.first_failure = fmt::format("world {}, {}: #wrong {} of {}; {}", world, c.name, c.wrong, c.checked, c.detail);
      }
    }
  }
  std::vector<CheckLine> lines;
  for (const Group& g : groups) {
    CheckLine line{g.failed == 0 && g.cases > 0, g.name, ""};
    if (g.cases == 0) {
      line.detail = "not run: no world connected";
    } else if (g.failed == 0) {
      line.detail = fmt::format("{}; world{} {}: {} case{}{}, #wrong 0", g.what, runs.size() == 1 ? "" : "s", worlds,
                                g.cases, g.cases == 1 ? "" : "s",
                                g.checked == 0 ? "" : fmt::format(", {} elements", g.checked));
    } else {
      line.detail = fmt::format("{} of {} cases failed, #wrong {}; first: {}", g.failed, g.cases, g.wrong, g.first_failure);
    }
    if (g.name == "connect" && !refused_worlds.empty()) {
      std::string list;
      for (const int w : refused_worlds) list += (list.empty() ? "" : ", ") + std::to_string(w);
      line.detail += fmt::format("; refuses world{} {} ({})", refused_worlds.size() == 1 ? "" : "s", list, refusal);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace

CommCheckReport check_communicator(const CommMaker& make, Backend& backend, const CommCheckTimes& times) {
  CommCheckReport report;
  // What the probes find, shared with their watched thread.
  struct Probe {
    // A connected world of one rank stays alive, idle, until the end (in the report): a
    // transport that starts process-wide state once and stops it with its last communicator, as
    // MPI does, could not start it again for the next check (and a refused connect, which MPI's
    // is for more ranks than mpirun started, would already stop it). Whether this connect works
    // is the suite's business.
    World keep_alive{1};
    bool two_ranks = false;  // world 2 connects; otherwise `local`-like, one rank only
    Dtypes dtypes;
    CheckLine line;
  };
  const auto probe = std::make_shared<Probe>();
  report.keep_alive = probe;
  const std::string blocked = run_steps(
      [probe, make, &backend, timeout = times.suite](const Step& step) {
        step("world 1, connect");
        (void)connect_all(probe->keep_alive, make, backend, timeout);
        step("world 2, connect");
        World w(2);
        probe->two_ranks = connect_all(w, make, backend, timeout).empty();
        abort_all(w);
        probe->line = probe_dtypes(make, backend, probe->two_ranks ? 2 : 1, timeout, probe->dtypes, step);
      },
      times, report.hung);
  if (!blocked.empty()) {
    report.lines.push_back(CheckLine{false, "dtypes", "a call stayed blocked: " + blocked});
    return report;
  }
  report.lines.push_back(probe->line);
  if (!probe->line.ok) return report;
  const bool two_ranks = probe->two_ranks;
  const Dtypes& dtypes = probe->dtypes;

  // The suite in every world; a world every rank refuses at connect is noted, not failed.
  std::vector<std::pair<int, std::vector<CaseResult>>> runs;
  std::vector<int> refused_worlds;
  std::string refusal;
  for (const int world : kWorlds) {
    auto results = std::make_shared<std::vector<CaseResult>>();
    CommSuiteSpec spec;
    spec.make = make;
    spec.dtypes = dtypes.taken;
    const std::string hung_case = run_steps(
        [results, spec, &backend, world, timeout = times.suite](const Step& step) mutable {
          spec.on_case = [&step, world](const std::string& name) { step(fmt::format("world {}, {}", world, name)); };
          dist::MemoryStore store(world);
          *results = run_comm_suite(spec, threads_in_this_process(world), &store, backend, timeout);
        },
        times, report.hung);
    if (!hung_case.empty()) {
      report.lines.push_back(CheckLine{false, "suite", "a collective stayed blocked: " + hung_case});
      return report;
    }
    if (world > 1 && results->front().refused) {
      refused_worlds.push_back(world);
      if (refusal.empty()) refusal = results->front().detail;
      continue;
    }
    runs.emplace_back(world, std::move(*results));
  }
  for (auto& line : suite_lines(runs, refused_worlds, refusal, dtypes)) report.lines.push_back(std::move(line));

  // A rank that never comes, one that goes quiet, and the watchdog's abort(), in world 2.
  if (!two_ranks) {
    for (const char* name : {"missing_rank", "silent_peer", "abort"}) {
      report.lines.push_back(CheckLine{true, name, "not run: the communicator refuses world 2", true});
    }
    return report;
  }
  report.lines.push_back(run_check("missing_rank", [&]() -> Verdict {
    auto w = std::make_shared<World>(2);
    w->comms[0] = make(rank_of(0, 2, "kiln plugins test"));
    const milliseconds limit = times.short_timeout() + times.grace();
    const Watched r = watch([w, &backend, timeout = times.short_timeout()] {
                              w->comms[0]->connect(context(*w, backend, 0, 2, timeout));
                            },
                            limit, times.grace(), [w] { w->comms[0]->abort(); }, report.hung);
    return expect_comm_error(r, "connect with rank 1 absent", limit, times);
  }));
  report.lines.push_back(run_check("silent_peer", [&]() -> Verdict {
    std::string error;
    const auto w = connected_pair(make, backend, times.short_timeout(), error);
    if (!w) return {false, error};
    const milliseconds limit = times.short_timeout() + times.grace();
    const Watched r = all_reduce_on_rank_0(w, backend, limit, times.grace(), [w] { w->comms[0]->abort(); }, report.hung);
    return expect_comm_error(r, "all_reduce on rank 0 while rank 1 stays connected but calls nothing", limit, times);
  }));
  report.lines.push_back(run_check("abort", [&]() -> Verdict {
    std::string error;
    const auto w = connected_pair(make, backend, times.suite, error);
    if (!w) return {false, error};
    // abort() is called from another thread, as the trainer's watchdog does, kAbortAfter after
    // the all_reduce started waiting for a peer that never calls it.
    std::thread aborter([w] {
      std::this_thread::sleep_for(kAbortAfter);
      w->comms[0]->abort();
    });
    const Watched r = all_reduce_on_rank_0(w, backend, kAbortAfter + times.grace(), times.grace(), nullptr, report.hung);
    aborter.join();
    if (!r.returned) {
      return {false, fmt::format("a waiting all_reduce was still blocked {:g} s after abort() (timeout {:g} s)",
                                 seconds_of(times.grace()), seconds_of(times.suite))};
    }
    if (r.error.empty()) return {false, "the all_reduce returned normally although rank 1 never called it"};
    if (!r.comm_error) return {false, "the released all_reduce threw " + r.error};
    return {true, fmt::format("released a waiting all_reduce after {:.1f} s: {}", r.seconds, r.error)};
  }));
  return report;
}

}  // namespace kiln::cli
