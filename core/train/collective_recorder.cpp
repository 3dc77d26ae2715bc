// The flight recorder's ring and the communicator that feeds it (see collective_recorder.hpp).
#include "kiln/train/collective_recorder.hpp"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <exception>

#include "kiln/crash/crash_context.hpp"
#include "kiln/dist/reduce_op_name.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/host_name.hpp"
#include "kiln/io/text_out.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/train/collective_purpose.hpp"

namespace kiln::train {
namespace {

/// "all_reduce(sum)", "broadcast(root 0)": without allocating, for on_fatal_signal too.
void put_op(io::TextOut& out, CollectiveRecorder::Kind kind, std::int64_t extra) {
  switch (kind) {
    case CollectiveRecorder::Kind::all_reduce:
      out << "all_reduce(" << dist::reduce_op_name(static_cast<ReduceOp>(extra)) << ")";
      return;
    case CollectiveRecorder::Kind::broadcast: out << "broadcast(root " << extra << ")"; return;
    case CollectiveRecorder::Kind::all_gather: out << "all_gather"; return;
    case CollectiveRecorder::Kind::barrier: out << "barrier"; return;
  }
  out << "?";
}

/// "gradients, bucket 3" (a purpose and its number), "loss check", or nothing.
void put_purpose(io::TextOut& out, const char* purpose, std::int64_t number) {
  if (!purpose) return;
  out << purpose;
  if (number >= 0) out << " " << number;
}

/// Milliseconds since the Unix epoch by clock_gettime (async-signal-safe).
std::int64_t wall_clock_ms_in_handler() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
}

/// One line on stderr from a signal handler.
void say_in_handler(std::string_view a, std::string_view b, std::string_view c) noexcept {
  char text[4096];
  io::BufferOut out(text, sizeof(text), STDERR_FILENO);
  out << a << b << c << "\n";
  out.flush();
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

CollectiveRecorder::~CollectiveRecorder() { crash::clear_fatal_signal_listener(this); }

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

template <class Visit>
void CollectiveRecorder::each_entry(Visit&& visit) const {
  const auto kept = std::min<std::int64_t>(issued_, static_cast<std::int64_t>(ring_.size()));
  for (std::int64_t seq = issued_ - kept + 1; seq <= issued_; ++seq) {
    const Slot& s = ring_[static_cast<std::size_t>(seq - 1) % ring_.size()];
    char op_text[64], purpose_text[256];  // ample: the longest op is ~30 bytes, purposes ~70
    io::BufferOut op(op_text, sizeof(op_text)), purpose(purpose_text, sizeof(purpose_text));
    put_op(op, s.kind, s.extra);
    put_purpose(purpose, s.purpose, s.purpose_number);
    visit(EntryView{s.seq, op.text(), s.dtype, s.count, purpose.text(), s.phase ? s.phase : "", s.epoch, s.step,
                    s.issued_ms, s.wait_ms, s.end_ms, s.error},
          seq == issued_ - kept + 1);
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
  each_entry([&](const EntryView& v, bool) {
    t.entries.push_back(CollectiveEntry{v.seq, std::string(v.op), std::string(v.dtype), v.count, std::string(v.purpose),
                                        std::string(v.phase), v.epoch, v.step, v.issued_ms, v.wait_ms, v.end_ms,
                                        std::string(v.error)});
  });
  return t;
}

void CollectiveRecorder::write_into(std::filesystem::path dir) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    dir_ = std::move(dir);
    host_ = io::host_name();
    crash_dir_ = dir_.string();
    crash_file_ = (dir_ / fmt::format("rank{}.json", rank_)).string();
    crash_temp_ = crash_file_ + ".tmp";
  }
  crash::set_fatal_signal_listener(this);
}

void CollectiveRecorder::on_fatal_signal(std::string_view what) noexcept {
  if (crash_file_.empty() || dumped_.exchange(true)) return;
  // The ring's lock, if another thread releases it soon; a thread holding it now may be the
  // one that crashed, or stopped for good.
  bool locked = false;
  for (int tries = 0; tries < 100 && !(locked = mutex_.try_lock()); ++tries) {
    const timespec millisecond{0, 1'000'000};
    ::nanosleep(&millisecond, nullptr);
  }
  ::mkdir(crash_dir_.c_str(), 0755);  // EEXIST is the common case; open() reports the rest
  const int fd = ::open(crash_temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool written = false;
  if (fd >= 0) {
    static char buffer[16384];  // static: the handler may run on a small alternate stack
    io::BufferOut out(buffer, sizeof(buffer), fd);
    const crash::RunPosition at = crash::run_position();
    write_trace_head(out, TraceHeadView{rank_, world_, host_, ::getpid(), communicator_, what,
                                        at.phase ? at.phase : "", at.epoch, at.epochs, at.step, at.steps,
                                        started_ms_, wall_clock_ms_in_handler(), issued_});
    each_entry([&](const EntryView& entry, bool first) { write_trace_entry(out, entry, first); });
    write_trace_end(out);
    out.flush();
    written = out.ok() && ::fsync(fd) == 0;
    written = ::close(fd) == 0 && written;
    written = written && ::rename(crash_temp_.c_str(), crash_file_.c_str()) == 0;
    if (!written) ::unlink(crash_temp_.c_str());
  }
  if (locked) mutex_.unlock();
  if (written) {
    say_in_handler("kiln: this rank's last collectives were written to ", crash_file_, "");
  } else {
    say_in_handler("kiln: could not write the record of this rank's last collectives to ", crash_file_,
                   fd < 0 ? " (cannot create the file)" : " (a write failed)");
  }
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
    if (dumped_.exchange(true)) return {};
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
