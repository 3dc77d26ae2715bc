// DataLoader: worker threads decode one rank's batches into a fixed ring of staging buffers.
//
// Decisions: work is claimed in order, in chunks of rows (about batch / workers), under one
// mutex; each row lands in a fixed row of a fixed slot, so the bytes never depend on which
// worker decoded them. The ring has prefetch + 1 slots (see the header). start_epoch() and the
// destructor first stop new claims, then wait for chunks in flight, so no worker ever writes a
// buffer that has been handed to a new epoch. A worker's exception is stored in its batch's
// slot and rethrown by next() when that batch is due, and again on every later next() of the
// epoch, so an error is never skipped. A slot whose batch the caller tied to an upload event
// (release_after) is fenced: the first worker to claim it takes the event, marks the slot
// `fencing` (so no other worker claims it) and waits outside the lock; the event outlives
// start_epoch(), since an upload from the last epoch can still be pending.
#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>

#include "kiln/crash/thread_signal_stack.hpp"
#include "kiln/data/data_loader.hpp"
#include "kiln/errors.hpp"
#include "kiln/rng.hpp"

namespace kiln::data {
namespace {

ShardOptions with_count(ShardOptions options, std::int64_t count) {
  options.count = count;
  return options;
}

const DataSource& checked_source(const std::shared_ptr<const DataSource>& source) {
  if (!source) throw Error("DataLoader needs a data source, got a null pointer");
  return *source;
}

// One batch's staging memory and decoding progress.
struct Slot {
  Tensor inputs;               // (B, sample_shape...) in the source's dtype, host memory
  Tensor labels;               // (B) i32, host memory
  std::int64_t step = -1;      // step of the current epoch this slot holds; -1 = none
  BatchIndices rows;           // which samples, set when the first chunk is claimed
  std::int64_t done = 0;       // rows decoded (or given up on because of an error)
  std::exception_ptr error;    // first error while decoding this batch
  std::shared_ptr<Event> in_use;  // device work may read this slot until the event completes
  bool fencing = false;        // a worker is waiting for `in_use`; nobody claims the slot
};

}  // namespace

struct DataLoader::Impl {
  Impl(std::shared_ptr<const DataSource> src, Backend* backend, const LoaderOptions& options);
  ~Impl();
  void start_workers(int count);
  void worker_loop();
  bool claimable() const;
  Slot& slot_of(std::int64_t step) { return slots[static_cast<std::size_t>(step % ring)]; }
  Tensor staging(Backend* backend, const Shape& shape, DType dtype) const;

  std::shared_ptr<const DataSource> source;
  DatasetInfo info;
  Sharder sharder;
  std::int64_t ring = 0;          // slots: prefetch + 1
  std::int64_t chunk = 1;         // rows claimed at once
  std::size_t sample_bytes = 0;
  std::vector<Slot> slots;
  std::vector<std::thread> threads;

  // Everything below is guarded by `mu`.
  std::mutex mu;
  std::condition_variable work_cv;   // workers: something became claimable, or stop
  std::condition_variable ready_cv;  // next(): a batch finished
  std::condition_variable idle_cv;   // start_epoch(): the last chunk in flight finished
  bool stop = false;
  bool active = false;               // an epoch is running and workers may claim
  bool started = false;              // start_epoch() was called at least once
  std::int64_t epoch = 0;
  std::vector<std::int64_t> order;   // this epoch's position -> sample index
  std::int64_t next_step = 0;        // the step next() returns next
  std::int64_t oldest_live = 0;      // oldest step whose slot may not be reused yet
  std::int64_t claim_step = 0;       // next rows to hand to a worker
  std::int64_t decoded_samples = 0;  // totals for stats()
  double decode_seconds = 0;
  int num_workers = 0;
  std::int64_t claim_row = 0;
  int in_flight = 0;                 // chunks being decoded outside the lock
  std::exception_ptr failure;        // sticky error of this epoch, rethrown by next()
};

DataLoader::Impl::Impl(std::shared_ptr<const DataSource> src, Backend* backend,
                       const LoaderOptions& options)
    : source(std::move(src)),
      info(checked_source(source).describe()),
      sharder(with_count(options.shard, info.count)) {
  if (options.workers < 1) {
    throw ConfigError(fmt::format("loader.workers = {}; it must be at least 1", options.workers));
  }
  if (options.prefetch < 1) {
    throw ConfigError(fmt::format("loader.prefetch = {}; it must be at least 1", options.prefetch));
  }
  const std::int64_t sample_numel = shape_numel(info.sample_shape);
  if (info.sample_shape.empty() || sample_numel < 1) {
    throw DataError(fmt::format("data source '{}' describes samples of shape {}; it needs at least "
                                "one element per sample",
                                source->name(), shape_string(info.sample_shape)));
  }
  const std::int64_t batch = options.shard.batch;
  ring = options.prefetch + 1;
  chunk = std::max<std::int64_t>(1, (batch + options.workers - 1) / options.workers);
  sample_bytes = static_cast<std::size_t>(sample_numel) * dtype_size(info.sample_dtype);

  Shape input_shape{batch};
  input_shape.insert(input_shape.end(), info.sample_shape.begin(), info.sample_shape.end());
  slots.resize(static_cast<std::size_t>(ring));
  for (Slot& slot : slots) {
    slot.inputs = staging(backend, input_shape, info.sample_dtype);
    slot.labels = staging(backend, Shape{batch}, DType::i32);
  }
}

DataLoader::Impl::~Impl() {
  {
    std::lock_guard lock(mu);
    stop = true;
    active = false;
  }
  work_cv.notify_all();
  for (std::thread& t : threads) t.join();
}

Tensor DataLoader::Impl::staging(Backend* backend, const Shape& shape, DType dtype) const {
  Tensor t;
  try {
    t = backend ? backend->allocate(shape, dtype, MemoryKind::host_pinned) : host_tensor(shape, dtype);
  } catch (const BackendError& e) {
    // Name who asked: the batch buffer is sized by loader.batch (or eval_batch).
    throw BackendError(fmt::format("data loader, batch buffer {}{} (sized by loader.batch): {}", dtype_name(dtype),
                                   shape_string(shape), e.what()));
  }
  if (!t.defined() || t.memory() == MemoryKind::device || t.shape() != shape ||
      t.dtype() != dtype) {
    throw BackendError(fmt::format(
        "backend '{}' returned {} in {} memory when the data loader asked for pinned host {}{}",
        backend ? backend->name() : "none", t.defined() ? t.describe() : "an undefined tensor",
        t.memory() == MemoryKind::device ? "device" : "host", dtype_name(dtype),
        shape_string(shape)));
  }
  return t;
}

void DataLoader::Impl::start_workers(int count) {
  num_workers = count;
  threads.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([this] {
      // A data source's read() runs here: a stack overflow in it is reported, not silent.
      const crash::ThreadSignalStack signal_stack;
      worker_loop();
    });
    const std::string name = fmt::format("kiln-data-{}", i);  // shows up in top/gdb
    pthread_setname_np(threads.back().native_handle(), name.substr(0, 15).c_str());
  }
}

bool DataLoader::Impl::claimable() const {
  return active && claim_step < sharder.steps_per_epoch() && claim_step < oldest_live + ring &&
         !slots[static_cast<std::size_t>(claim_step % ring)].fencing;
}

void DataLoader::Impl::worker_loop() {
  const std::uint64_t seed = sharder.options().seed;
  std::unique_lock lock(mu);
  for (;;) {
    work_cv.wait(lock, [this] { return stop || claimable(); });
    if (stop) return;

    const std::int64_t step = claim_step;
    Slot& slot = slot_of(step);
    if (slot.in_use) {  // an upload from this slot may be pending: wait for it first
      const std::shared_ptr<Event> event = std::move(slot.in_use);
      slot.fencing = true;
      ++in_flight;  // start_epoch() waits for this too
      lock.unlock();
      std::exception_ptr error;
      try {
        event->synchronize();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      slot.fencing = false;
      --in_flight;
      if (error && !failure) failure = error;
      if (in_flight == 0) idle_cv.notify_all();
      work_cv.notify_all();
      ready_cv.notify_all();
      continue;  // claim again: the epoch may have changed meanwhile
    }
    if (claim_row == 0) {  // first chunk of this step: the slot is free, point it at the step
      slot.rows = sharder.batch_in_order(order, step);
      slot.step = step;
      slot.done = 0;
      slot.error = nullptr;
    }
    const auto rows = static_cast<std::int64_t>(slot.rows.indices.size());
    const std::int64_t row0 = claim_row;
    const std::int64_t n = std::min(chunk, rows - row0);
    claim_row += n;
    if (claim_row >= rows) {
      ++claim_step;
      claim_row = 0;
    }
    if (n == 0) {  // an empty batch (partial policy): complete as soon as it is claimed
      ready_cv.notify_all();
      continue;
    }
    const std::int64_t decode_epoch = epoch;
    ++in_flight;
    lock.unlock();

    // Outside the lock: this slot's rows [row0, row0 + n) belong to this worker alone until it
    // reports back, and the slot cannot be reassigned before that (see start_epoch).
    std::exception_ptr error;
    const auto decode_start = std::chrono::steady_clock::now();
    try {
      auto* inputs = static_cast<std::byte*>(slot.inputs.data());
      auto* labels = slot.labels.data_as<std::int32_t>();
      for (std::int64_t r = row0; r < row0 + n; ++r) {
        const std::int64_t index = slot.rows.indices[static_cast<std::size_t>(r)];
        const SampleSlot out{inputs + static_cast<std::size_t>(r) * sample_bytes, sample_bytes,
                             labels + r};
        source->read(index,
                     derive_seed(seed, static_cast<std::uint64_t>(decode_epoch),
                                 static_cast<std::uint64_t>(index)),
                     out);
      }
    } catch (...) {
      error = std::current_exception();
    }

    const double busy = std::chrono::duration<double>(std::chrono::steady_clock::now() - decode_start).count();
    lock.lock();
    decoded_samples += n;
    decode_seconds += busy;
    --in_flight;
    if (active) {  // not abandoned by start_epoch() or the destructor
      if (error && !slot.error) slot.error = error;
      slot.done += n;
      if (slot.done == rows) ready_cv.notify_all();
    }
    if (in_flight == 0) idle_cv.notify_all();
  }
}

DataLoader::DataLoader(std::shared_ptr<const DataSource> source, Backend* backend,
                       const LoaderOptions& options)
    : impl_(std::make_unique<Impl>(std::move(source), backend, options)) {
  impl_->start_workers(options.workers);
}

DataLoader::~DataLoader() = default;  // Impl's destructor stops and joins the workers

std::int64_t DataLoader::steps_per_epoch() const noexcept {
  return impl_->sharder.steps_per_epoch();
}

const DatasetInfo& DataLoader::info() const noexcept { return impl_->info; }

void DataLoader::start_epoch(std::int64_t epoch, std::int64_t first_step) {
  if (epoch < 0) throw Error(fmt::format("DataLoader::start_epoch({}): epochs count from 0", epoch));
  Impl& s = *impl_;
  if (first_step < 0 || first_step > s.sharder.steps_per_epoch()) {
    throw Error(fmt::format("DataLoader::start_epoch({}, {}): the first step must be in [0, {}]", epoch, first_step,
                            s.sharder.steps_per_epoch()));
  }
  std::vector<std::int64_t> order = s.sharder.epoch_order(epoch);  // O(count), outside the lock

  std::unique_lock lock(s.mu);
  s.active = false;  // no new claims; chunks in flight finish and are discarded
  s.idle_cv.wait(lock, [&s] { return s.in_flight == 0; });
  for (Slot& slot : s.slots) {
    slot.step = -1;
    slot.done = 0;
    slot.error = nullptr;
    slot.rows = {};
  }
  s.order = std::move(order);
  s.epoch = epoch;
  // Slots are indexed by step modulo the ring, so starting every counter at first_step is the
  // same pipeline as an epoch that had already handed out the steps before it.
  s.next_step = first_step;
  s.oldest_live = first_step;
  s.claim_step = first_step;
  s.claim_row = 0;
  s.failure = nullptr;
  s.active = true;
  s.started = true;
  lock.unlock();
  s.work_cv.notify_all();
}

std::optional<Batch> DataLoader::next() {
  const auto t0 = std::chrono::steady_clock::now();
  Impl& s = *impl_;
  std::unique_lock lock(s.mu);
  if (!s.started) {
    throw Error("DataLoader::next() was called before start_epoch(); call start_epoch(epoch) at "
                "the start of every epoch");
  }
  if (s.failure) std::rethrow_exception(s.failure);
  if (s.next_step >= s.sharder.steps_per_epoch()) {
    s.oldest_live = s.next_step;  // the caller's last batch is released too
    return std::nullopt;
  }

  // The batch the caller held since the previous next() is released now.
  s.oldest_live = s.next_step;
  s.work_cv.notify_all();
  const std::int64_t step = s.next_step;
  Slot& slot = s.slot_of(step);
  const auto ready = [&] {
    return slot.step == step && slot.done == static_cast<std::int64_t>(slot.rows.indices.size());
  };
  // A failed upload event (set by a fencing worker) ends the wait too.
  s.ready_cv.wait(lock, [&] { return ready() || s.failure; });
  if (s.failure) std::rethrow_exception(s.failure);
  if (slot.error) {
    s.failure = slot.error;
    std::rethrow_exception(s.failure);
  }

  Batch batch;
  batch.rows = static_cast<std::int64_t>(slot.rows.indices.size());
  batch.inputs = slot.inputs.rows(0, batch.rows);
  batch.labels = slot.labels.rows(0, batch.rows);
  batch.valid_rows = slot.rows.valid;
  batch.global_rows = slot.rows.global_rows;
  batch.global_valid = slot.rows.global_valid;
  batch.epoch = s.epoch;
  batch.step = step;
  ++s.next_step;
  lock.unlock();
  batch.wait_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return batch;
}

void DataLoader::release_after(std::shared_ptr<Event> event) {
  if (!event) return;
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  if (s.next_step == 0) return;  // nothing handed out in this epoch
  // The caller's batch is step next_step - 1; workers cannot claim its slot before the next
  // next() (claim_step < oldest_live + ring), so no worker can be writing it now.
  s.slot_of(s.next_step - 1).in_use = std::move(event);
}

DataLoader::Stats DataLoader::stats() const {
  std::lock_guard lock(impl_->mu);
  return Stats{impl_->decoded_samples, impl_->decode_seconds};
}

int DataLoader::workers() const noexcept { return impl_->num_workers; }

}  // namespace kiln::data
