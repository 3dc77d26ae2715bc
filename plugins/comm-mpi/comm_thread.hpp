// CommThread: the one thread that makes the mpi communicator's MPI calls.
//
// Collectives are MPI's blocking ones (MPI_Allreduce, ...), which Open MPI runs with its tuned
// algorithms; its non-blocking ones (libnbc) only progress while someone calls MPI_Test and
// measured slower here (docs/benchmarks.md). Running the blocking calls on this thread keeps
// collectives asynchronous for the caller (GradSync keeps computing) and keeps them in issue
// order. A task's outcome is an MPI return code; Done lets a Work wait for it with a deadline.
// If a task never returns (a peer died inside a collective), the thread is abandoned at
// destruction rather than joined (after a 2 s grace for one that is merely late).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace kiln::mpi_comm {

/// Completion of one task: its MPI return code.
class Done {
 public:
  void finish(int rc);
  /// Waits until finished or `deadline`; returns whether it finished (rc in `rc`).
  bool wait_until(std::chrono::steady_clock::time_point deadline, int& rc);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  int rc_ = 0;
};

class CommThread {
 public:
  CommThread();
  /// Runs what is queued, then stops and joins; if abandoned, waits at most 2 s for a running
  /// task to return, then detaches the thread.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  /// Queues `task` (returns an MPI code); tasks run one at a time in submission order.
  std::shared_ptr<Done> submit(std::function<int()> task);
  /// Marks the thread abandoned: queued tasks are skipped (they finish with `skipped_rc`) and
  /// the destructor will not join a stuck task.
  void abandon(int skipped_rc) noexcept;

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::pair<std::function<int()>, std::shared_ptr<Done>>> tasks;
    std::atomic<int> queued{0};  // tasks.size(), readable without the mutex (spinning)
    bool stopping = false;
    bool abandoned = false;
    bool exited = false;
    int skipped_rc = 0;
  };
  static void loop(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace kiln::mpi_comm
