// The mpi communicator's MPI thread (see comm_thread.hpp).
#include "comm_thread.hpp"

#include <thread>
#include <utility>

namespace kiln::mpi_comm {
namespace {

// Both sides spin (yielding) this long before sleeping on a condition variable: a collective is
// usually issued right after the last and waited for right away, and a thread woken from a
// condition variable on a busy, oversubscribed machine waits for a core (measured: 0.7x MPI's
// own busbw at 1 MB without the spin).
constexpr auto kSpin = std::chrono::microseconds(500);

}  // namespace

void Done::finish(int rc) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    rc_ = rc;
  }
  cv_.notify_all();
}

bool Done::wait_until(std::chrono::steady_clock::time_point deadline, int& rc) {
  const auto spin_end = std::min(deadline, std::chrono::steady_clock::now() + kSpin);
  while (!done_.load() && std::chrono::steady_clock::now() < spin_end) std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [this] { return done_.load(); })) return false;
  rc = rc_;
  return true;
}

CommThread::CommThread() : state_(std::make_shared<State>()) { thread_ = std::thread(loop, state_); }

CommThread::~CommThread() {
  bool abandoned = false;
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    abandoned = state_->abandoned;
  }
  state_->cv.notify_all();
  // An abandoned thread may be inside a collective that never returns: give it a moment to
  // finish one that is merely late, then leave it (it owns its state).
  if (abandoned) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    const bool exited = state_->cv.wait_for(lock, std::chrono::seconds(2), [this] { return state_->exited; });
    lock.unlock();
    if (!exited) {
      thread_.detach();
      return;
    }
  }
  thread_.join();
}

std::shared_ptr<Done> CommThread::submit(std::function<int()> task) {
  auto done = std::make_shared<Done>();
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->abandoned) {
      done->finish(state_->skipped_rc);
      return done;
    }
    state_->tasks.emplace_back(std::move(task), done);
    state_->queued.store(static_cast<int>(state_->tasks.size()));
  }
  state_->cv.notify_all();
  return done;
}

void CommThread::abandon(int skipped_rc) noexcept {
  std::deque<std::pair<std::function<int()>, std::shared_ptr<Done>>> skipped;
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->abandoned = true;
    state_->skipped_rc = skipped_rc;
    skipped.swap(state_->tasks);
    state_->queued.store(0);
  }
  for (auto& [task, done] : skipped) done->finish(skipped_rc);
}

void CommThread::loop(std::shared_ptr<State> state) {
  for (;;) {
    std::pair<std::function<int()>, std::shared_ptr<Done>> next;
    const auto spin_end = std::chrono::steady_clock::now() + kSpin;
    while (state->queued.load() == 0 && std::chrono::steady_clock::now() < spin_end) std::this_thread::yield();
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->cv.wait(lock, [&] { return state->stopping || !state->tasks.empty(); });
      if (state->tasks.empty()) {  // stopping, nothing left
        state->exited = true;
        state->cv.notify_all();
        return;
      }
      next = std::move(state->tasks.front());
      state->tasks.pop_front();
      state->queued.store(static_cast<int>(state->tasks.size()));
    }
    next.second->finish(next.first());
  }
}

}  // namespace kiln::mpi_comm
