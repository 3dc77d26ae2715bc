// The flight recorder's ring and the communicator that feeds it (see collective_recorder.hpp).
#include "kiln/train/collective_recorder.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <exception>

#include "kiln/crash/crash_context.hpp"
#include "kiln/dist/reduce_op_name.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/host_name.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/train/collective_purpose.hpp"

namespace kiln::train {
namespace {

std::string op_text(CollectiveRecorder::Kind kind, std::int64_t extra) {
  switch (kind) {
    case CollectiveRecorder::Kind::all_reduce:
      return fmt::format("all_reduce({})", dist::reduce_op_name(static_cast<ReduceOp>(extra)));
    case CollectiveRecorder::Kind::broadcast: return fmt::format("broadcast(root {})", extra);
    case CollectiveRecorder::Kind::all_gather: return "all_gather";
    case CollectiveRecorder::Kind::barrier: return "barrier";
  }
  return "?";
}

/// Forwards wait() and notes when it began and how it ended.
class RecordedWork final : public Work {
 public:
  RecordedWork(std::unique_ptr<Work> inner, std::shared_ptr<CollectiveRecorder> recorder, std::int64_t seq)
      : inner_(std::move(inner)), recorder_(std::move(recorder)), seq_(seq) {}
  void wait() override {
    recorder_->waiting(seq_);
    try {
      inner_->wait();
    } catch (const std::exception& e) {
      recorder_->failed(seq_, e.what());
      throw;
    } catch (...) {
      recorder_->failed(seq_, "an exception that is not a std::exception");
      throw;
    }
    recorder_->completed(seq_);
  }

 private:
  std::unique_ptr<Work> inner_;
  std::shared_ptr<CollectiveRecorder> recorder_;
  std::int64_t seq_;
};

}  // namespace

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

CollectiveRecorder::CollectiveRecorder(std::size_t capacity)
    : ring_(capacity == 0 ? 1 : capacity), started_ms_(wall_clock_ms()) {}

void CollectiveRecorder::set_identity(int rank, int world, std::string communicator) {
  const std::lock_guard<std::mutex> lock(mutex_);
  rank_ = rank;
  world_ = world;
  communicator_ = std::move(communicator);
}

CollectiveRecorder::Slot* CollectiveRecorder::slot_of(std::int64_t seq) {
  if (seq < 1) return nullptr;
  Slot& s = ring_[static_cast<std::size_t>(seq - 1) % ring_.size()];
  return s.seq == seq ? &s : nullptr;
}

std::int64_t CollectiveRecorder::issued(Kind kind, const Tensor& t, std::int64_t extra) {
  const crash::RunPosition at = crash::run_position();
  const std::int64_t now = wall_clock_ms();
  const std::lock_guard<std::mutex> lock(mutex_);
  const std::int64_t seq = ++issued_;
  Slot& s = ring_[static_cast<std::size_t>(seq - 1) % ring_.size()];
  s = Slot{};
  s.seq = seq;
  s.kind = kind;
  s.extra = extra;
  if (t.defined()) {
    s.dtype = dtype_name(t.dtype());
    s.count = t.numel();
  }
  s.purpose = CollectivePurpose::text();
  s.purpose_number = CollectivePurpose::number();
  s.phase = at.phase;
  s.epoch = at.epoch;
  s.step = at.step;
  s.issued_ms = now;
  return seq;
}

void CollectiveRecorder::waiting(std::int64_t seq) {
  const std::int64_t now = wall_clock_ms();
  const std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* s = slot_of(seq); s && s->wait_ms < 0) s->wait_ms = now;
}

void CollectiveRecorder::completed(std::int64_t seq) {
  const std::int64_t now = wall_clock_ms();
  const std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* s = slot_of(seq)) s->end_ms = now;
}

void CollectiveRecorder::failed(std::int64_t seq, std::string error) {
  const std::int64_t now = wall_clock_ms();
  const std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* s = slot_of(seq)) {
    s->end_ms = now;
    s->error = error.empty() ? std::string("failed") : std::move(error);
  }
}

RankTrace CollectiveRecorder::snapshot(std::string reason) const {
  const crash::RunPosition at = crash::run_position();
  RankTrace t;
  t.host = io::host_name();
  t.pid = ::getpid();
  t.reason = std::move(reason);
  t.phase = at.phase ? at.phase : "";
  t.epoch = at.epoch;
  t.epochs = at.epochs;
  t.step = at.step;
  t.steps = at.steps;
  t.written_ms = wall_clock_ms();
  t.started_ms = started_ms_;
  const std::lock_guard<std::mutex> lock(mutex_);
  t.rank = rank_;
  t.world = world_;
  t.communicator = communicator_;
  t.issued = issued_;
  const auto kept = std::min<std::int64_t>(issued_, static_cast<std::int64_t>(ring_.size()));
  for (std::int64_t seq = issued_ - kept + 1; seq <= issued_; ++seq) {
    const Slot& s = ring_[static_cast<std::size_t>(seq - 1) % ring_.size()];
    CollectiveEntry e;
    e.seq = s.seq;
    e.op = op_text(s.kind, s.extra);
    e.dtype = s.dtype;
    e.count = s.count;
    if (s.purpose) e.purpose = s.purpose_number >= 0 ? fmt::format("{} {}", s.purpose, s.purpose_number) : s.purpose;
    e.phase = s.phase ? s.phase : "";
    e.epoch = s.epoch;
    e.step = s.step;
    e.issued_ms = s.issued_ms;
    e.wait_ms = s.wait_ms;
    e.end_ms = s.end_ms;
    e.error = s.error;
    t.entries.push_back(std::move(e));
  }
  return t;
}

void CollectiveRecorder::write_into(std::filesystem::path dir) {
  const std::lock_guard<std::mutex> lock(mutex_);
  dir_ = std::move(dir);
}

std::filesystem::path CollectiveRecorder::dump(const std::string& reason) noexcept {
  std::filesystem::path file;
  try {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (dir_.empty()) return {};
      file = dir_ / fmt::format("rank{}.json", rank_);
    }
    const std::lock_guard<std::mutex> once(dump_mutex_);
    if (dumped_) return {};
    dumped_ = true;
    std::filesystem::create_directories(file.parent_path());
    io::write_file_atomic(file, to_json(snapshot(reason)));
    log::get("train")->info("this rank's last collectives were written to {}", file.string());
    return file;
  } catch (const std::exception& e) {
    // The record helps find a cause; failing to write it must not hide the cause itself.
    try {
      log::get("train")->warn("could not write the record of this rank's last collectives to {}: {}",
                              file.string(), e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  return {};
}

RecordingCommunicator::RecordingCommunicator(std::shared_ptr<Communicator> inner,
                                             std::shared_ptr<CollectiveRecorder> recorder)
    : inner_(std::move(inner)), recorder_(std::move(recorder)) {}

void RecordingCommunicator::connect(const CommContext& ctx) {
  inner_->connect(ctx);
  recorder_->set_identity(inner_->rank(), inner_->size(), inner_->describe());
}

template <class Issue>
std::unique_ptr<Work> RecordingCommunicator::record(CollectiveRecorder::Kind kind, const Tensor& t,
                                                    std::int64_t extra, Issue&& issue) {
  const std::int64_t seq = recorder_->issued(kind, t, extra);
  std::unique_ptr<Work> work;
  try {
    work = issue();
  } catch (const std::exception& e) {
    recorder_->failed(seq, e.what());
    throw;
  }
  return std::make_unique<RecordedWork>(std::move(work), recorder_, seq);
}

std::unique_ptr<Work> RecordingCommunicator::all_reduce(const Tensor& t, ReduceOp op) {
  return record(CollectiveRecorder::Kind::all_reduce, t, static_cast<std::int64_t>(op),
                [&] { return inner_->all_reduce(t, op); });
}

std::unique_ptr<Work> RecordingCommunicator::broadcast(const Tensor& t, int root) {
  return record(CollectiveRecorder::Kind::broadcast, t, root, [&] { return inner_->broadcast(t, root); });
}

std::unique_ptr<Work> RecordingCommunicator::all_gather(const Tensor& out, const Tensor& in) {
  return record(CollectiveRecorder::Kind::all_gather, in, 0, [&] { return inner_->all_gather(out, in); });
}

void RecordingCommunicator::barrier() {
  const std::int64_t seq = recorder_->issued(CollectiveRecorder::Kind::barrier, Tensor(), 0);
  recorder_->waiting(seq);
  try {
    inner_->barrier();
  } catch (const std::exception& e) {
    recorder_->failed(seq, e.what());
    throw;
  }
  recorder_->completed(seq);
}

}  // namespace kiln::train
