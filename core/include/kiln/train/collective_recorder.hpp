// Each rank's flight recorder of collectives (the record is described in collective_trace.hpp).
//
// RecordingCommunicator wraps the run's communicator. Every collective it forwards is noted in
// a ring of the latest `capacity` entries ([dist] recent_collectives): what it was, what it was
// for (collective_purpose.hpp), where the run was, when it was issued, when the rank began to
// wait for it, and when it completed or failed. Noting one costs a mutex and three clock reads,
// nothing next to the collective itself.
//
// When the rank stops abnormally -- an error escapes the training loop, or SIGTERM/SIGINT ends it
// (the supervisor stopping the ranks after a peer failed, mpirun or Slurm ending the job, Ctrl-C
// on a hung job) -- the ring is written to <run_dir>/debug/rank<N>.json (dump()). Only the first
// dump counts: the error that ended the run is the reason kept, not the SIGTERM that follows it.
//
// A crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) writes it too, from inside the fatal-signal
// handler (on_fatal_signal; kiln/crash/fatal_signal_report.hpp): the same file and format, written
// without allocating (io::BufferOut, write(2), rename(2)), with the crash report's first line as
// the reason. It waits up to 100 ms for the ring's lock (a thread may be noting a collective) and
// then reads the ring without it: a crash is no time to wait for a thread that may never run again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/crash/fatal_signal_report.hpp"
#include "kiln/train/collective_trace.hpp"

namespace kiln::train {

class CollectiveRecorder final : public crash::FatalSignalListener {
 public:
  enum class Kind : std::uint8_t { all_reduce, broadcast, all_gather, barrier };

  /// Keeps the latest `capacity` (>= 1) collectives.
  explicit CollectiveRecorder(std::size_t capacity);
  /// Stops listening for fatal signals.
  ~CollectiveRecorder();
  CollectiveRecorder(const CollectiveRecorder&) = delete;
  CollectiveRecorder& operator=(const CollectiveRecorder&) = delete;

  /// Who this rank is, for the record; called once the communicator is connected.
  void set_identity(int rank, int world, std::string communicator);

  /// Notes a collective being issued now and returns its sequence number. `extra` is the
  /// reduction (all_reduce) or the root (broadcast). `t` may be undefined (barrier).
  std::int64_t issued(Kind kind, const Tensor& t, std::int64_t extra);
  void waiting(std::int64_t seq);
  void completed(std::int64_t seq);
  void failed(std::int64_t seq, std::string error);

  /// The record as it stands, with `reason` and the run's position now.
  RankTrace snapshot(std::string reason) const;

  /// Where dump() writes: dir/rank<N>.json (N as set_identity() said, so call it after). Until
  /// this is called dump() writes nothing (a start that fails removes the run directory; see
  /// run.cpp). From here a fatal signal writes the record too (set_fatal_signal_listener).
  void write_into(std::filesystem::path dir);
  /// Writes the record once; later calls do nothing, but wait until a write in progress on another
  /// thread has finished (a stop signal arriving while the error path writes must not end the
  /// process halfway through). Returns the file written, or an empty path (nowhere to write,
  /// already written, or the write failed: logged, never thrown).
  std::filesystem::path dump(const std::string& reason) noexcept;

  /// dump() for a crash, called inside the fatal-signal handler: async-signal-safe, says on
  /// stderr where the record went. Does nothing before write_into() or after another dump.
  void on_fatal_signal(std::string_view what) noexcept override;

 private:
  struct Slot {
    std::int64_t seq = 0;  ///< 0: never used
    Kind kind = Kind::barrier;
    std::int64_t extra = 0;
    std::string_view dtype;  ///< dtype_name(): static text
    std::int64_t count = 0;
    const char* purpose = nullptr;
    std::int64_t purpose_number = -1;
    const char* phase = nullptr;
    std::int64_t epoch = 0, step = 0;
    std::int64_t issued_ms = 0, wait_ms = -1, end_ms = -1;
    std::string error;
  };
  /// The slot holding `seq`, or null if it was overwritten. Called with mutex_ held.
  Slot* slot_of(std::int64_t seq);
  /// Calls visit(EntryView, bool first) for each entry kept, oldest first, without allocating
  /// (on_fatal_signal uses it too). Called with mutex_ held, or in the handler.
  template <class Visit>
  void each_entry(Visit&& visit) const;

  mutable std::mutex mutex_;
  std::vector<Slot> ring_;
  std::int64_t issued_ = 0;
  int rank_ = 0, world_ = 1;
  std::string communicator_;
  std::int64_t started_ms_;
  std::filesystem::path dir_;
  std::mutex dump_mutex_;           ///< held for the whole of an ordinary dump
  std::atomic<bool> dumped_{false};  ///< set by the first dump, ordinary or on a fatal signal
  // Ready-made for on_fatal_signal, which cannot build strings: set by write_into, then constant.
  std::string host_, crash_dir_, crash_file_, crash_temp_;
};

/// Milliseconds since the Unix epoch, now.
std::int64_t wall_clock_ms();

/// The communicator the core uses when recording: forwards every call to `inner` and notes it.
class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(std::shared_ptr<Communicator> inner, std::shared_ptr<CollectiveRecorder> recorder);

  std::string_view name() const override { return inner_->name(); }
  void connect(const CommContext& ctx) override;
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool accepts(MemoryKind kind) const override { return inner_->accepts(kind); }
  std::string describe() const override { return inner_->describe(); }

  std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override;
  std::unique_ptr<Work> broadcast(const Tensor& t, int root) override;
  std::unique_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override;
  void barrier() override;
  void abort() noexcept override { inner_->abort(); }

 private:
  template <class Issue>
  std::unique_ptr<Work> record(CollectiveRecorder::Kind kind, const Tensor& t, std::int64_t extra, Issue&& issue);

  std::shared_ptr<Communicator> inner_;
  std::shared_ptr<CollectiveRecorder> recorder_;
};

}  // namespace kiln::train
