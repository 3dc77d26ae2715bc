// CommQueue: FIFO communication thread (see comm_queue.hpp).
#include "comm_queue.hpp"

#include <fmt/format.h>

#include <chrono>

#include "kiln/errors.hpp"

namespace kiln::gloo_comm {
namespace {
/// How long stop() waits for the running task to return once the connections are closed.
constexpr std::chrono::milliseconds kStopGrace{2000};
}  // namespace

void TaskState::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (done_) return;
    error_ = std::move(error);
    done_ = true;
  }
  done_cv_.notify_all();
}

void TaskState::wait() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

CommQueue::CommQueue() : shared_(std::make_shared<Shared>()) {
  thread_ = std::thread(&CommQueue::loop, shared_);
}

CommQueue::~CommQueue() { stop("the communicator was destroyed", {}); }

std::shared_ptr<TaskState> CommQueue::submit(std::function<void()> run, std::string label) {
  auto state = std::make_shared<TaskState>();
  std::unique_lock lock(shared_->mutex);
  if (shared_->stopping || !shared_->failure.empty()) {
    const std::string why = shared_->failure.empty() ? "the communicator was aborted" : shared_->failure;
    lock.unlock();
    state->finish(std::make_exception_ptr(CommError(fmt::format(
        "gloo {} not run: {}; the communicator is unusable after a failure, restart the run",
        label, why))));
    return state;
  }
  shared_->tasks.push_back(Task{std::move(run), std::move(label), state});
  lock.unlock();
  shared_->cv.notify_all();
  return state;
}

void CommQueue::loop(std::shared_ptr<Shared> shared) {
  std::unique_lock lock(shared->mutex);
  for (;;) {
    shared->cv.wait(lock, [&] { return shared->stopping || !shared->tasks.empty(); });
    if (shared->stopping) break;
    Task task = std::move(shared->tasks.front());
    shared->tasks.pop_front();
    const bool failed = !shared->failure.empty();
    const std::string failure = shared->failure;
    shared->running = task.state;
    shared->running_label = task.label;
    lock.unlock();

    std::exception_ptr error;
    if (failed) {
      error = std::make_exception_ptr(CommError(fmt::format(
          "gloo {} not run: an earlier collective failed ({})", task.label, failure)));
    } else {
      try {
        task.run();
      } catch (const std::exception& e) {
        error = std::current_exception();
        std::lock_guard failure_lock(shared->mutex);
        if (shared->failure.empty()) shared->failure = e.what();
      } catch (...) {
        error = std::current_exception();
        std::lock_guard failure_lock(shared->mutex);
        if (shared->failure.empty()) shared->failure = fmt::format("gloo {} failed", task.label);
      }
    }
    task.state->finish(error);
    lock.lock();
    shared->running.reset();
  }
  shared->exited = true;
  shared->cv.notify_all();
}

bool CommQueue::stop(const std::string& reason, const std::function<void()>& interrupt) noexcept {
  try {
    std::deque<Task> dropped;
    {
      std::lock_guard lock(shared_->mutex);
      if (shared_->stopping) return false;
      shared_->stopping = true;
      if (shared_->failure.empty()) shared_->failure = reason;
      dropped.swap(shared_->tasks);
    }
    shared_->cv.notify_all();
    for (auto& task : dropped) {
      task.state->finish(std::make_exception_ptr(
          CommError(fmt::format("gloo {} not run: {}", task.label, reason))));
    }
    if (interrupt) interrupt();
    // A task blocked in the transport returns once the connections are closed (interrupt) or
    // its own timeout passes; wait briefly, then leave the thread to finish on its own (it
    // holds `shared`, so nothing it touches is freed under it).
    std::unique_lock lock(shared_->mutex);
    if (shared_->cv.wait_for(lock, kStopGrace, [&] { return shared_->exited; })) {
      lock.unlock();
      thread_.join();
    } else {
      // Still blocked: a Gloo receive whose connection was closed on this side waits for its own
      // timeout. Its waiter must not: fail the task now (it owns its tensors, so the thread can
      // still write into them safely when it returns).
      const std::shared_ptr<TaskState> running = shared_->running;
      const std::string label = shared_->running_label;
      lock.unlock();
      if (running) {
        running->finish(std::make_exception_ptr(CommError(fmt::format(
            "gloo {} abandoned: {} while it was running; it was still blocked in the transport {} s "
            "after the connections were closed, and its thread ends when its own timeout passes",
            label, reason, std::chrono::duration_cast<std::chrono::seconds>(kStopGrace).count()))));
      }
      thread_.detach();
    }
  } catch (...) {
    if (thread_.joinable()) thread_.detach();
  }
  return true;
}

bool CommQueue::abort(const std::function<void()>& interrupt) noexcept {
  return stop("the communicator was aborted", interrupt);
}

}  // namespace kiln::gloo_comm
