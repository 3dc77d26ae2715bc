// CommQueue: the one communication thread of a gloo communicator. Collectives are queued in
// issue order and run one at a time, so every rank runs them in the same order (Gloo matches
// messages by slot, not by op), while the caller (GradSync) keeps computing.
//
// Failure model: the first task that throws marks the queue failed; every later task, queued or
// new, fails at once with a CommError that points back at the first failure (a collective
// after a failed one cannot match its peers). abort() fails what is queued, interrupts the
// running task through the `interrupt` callback and stops the thread without joining it for
// longer than a moment: the state lives in a shared_ptr the thread keeps alive.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/communicator.hpp"

namespace kiln::gloo_comm {

/// Completion state of one queued task, shared by the queue and the Work handle.
class TaskState {
 public:
  /// The first call wins: abort() may fail a running task that later finishes on its own.
  void finish(std::exception_ptr error);
  /// Blocks until finished; rethrows the task's exception.
  void wait();

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// Work handle returned to the caller of a collective.
class QueuedWork final : public Work {
 public:
  explicit QueuedWork(std::shared_ptr<TaskState> state) : state_(std::move(state)) {}
  void wait() override { state_->wait(); }

 private:
  std::shared_ptr<TaskState> state_;
};

class CommQueue {
 public:
  /// `label(seq)` describes a task in messages ("all_reduce #17 (f32 x 8, ring)").
  struct Task {
    std::function<void()> run;
    std::string label;
    std::shared_ptr<TaskState> state;
  };

  CommQueue();
  /// Stops the thread after the running task; queued tasks fail with CommError.
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  /// Queues `run`; the returned state completes when it has run (or failed/was skipped).
  std::shared_ptr<TaskState> submit(std::function<void()> run, std::string label);
  /// Fails queued tasks, calls `interrupt` (to unblock the running one) and stops the thread,
  /// waiting at most a short grace period for it. noexcept, idempotent: returns whether this
  /// call stopped the queue (false if it was already stopped).
  bool abort(const std::function<void()>& interrupt) noexcept;

 private:
  struct Shared {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Task> tasks;
    bool stopping = false;
    bool exited = false;
    std::string failure;  // first failure's message; non-empty = failed
    // The task the thread is running, so that abort() can fail it for its waiter when closing
    // the connections does not unblock it (Gloo's receives then wait for their own timeout).
    std::shared_ptr<TaskState> running;
    std::string running_label;
  };
  static void loop(std::shared_ptr<Shared> shared);
  bool stop(const std::string& reason, const std::function<void()>& interrupt) noexcept;

  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace kiln::gloo_comm
