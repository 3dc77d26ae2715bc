// The backend checks of `kiln plugins test` (see conformance_backend.hpp).
#include "conformance_backend.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cstring>
#include <string>
#include <thread>

#include "backend_suite/suite.hpp"
#include "kiln/errors.hpp"

namespace kiln::cli {
namespace {

const char* memory_name(MemoryKind kind) {
  return kind == MemoryKind::device ? "device" : kind == MemoryKind::host_pinned ? "pinned host" : "host";
}

const char* layout_name(Layout layout) {
  return layout == Layout::row_major ? "row_major" : layout == Layout::nhwc ? "nhwc" : "opaque";
}

// ---- device and ops --------------------------------------------------------------------------

Verdict check_device(const Backend& backend) {
  const DeviceInfo info = backend.device();
  if (info.name.empty()) return {false, "device().name is empty; the run banner prints it"};
  std::string layouts;
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const Layout layout = backend.activation_layout(dtype);
    if (layout != Layout::row_major && layout != Layout::nhwc) {
      return {false, fmt::format("activation_layout({}) is {}: layers can only give row_major or nhwc activations",
                                 dtype_name(dtype), layout_name(layout))};
    }
    layouts += fmt::format("{}{} {}", layouts.empty() ? "" : ", ", layout_name(layout), dtype_name(dtype));
  }
  return {true, fmt::format("{}{}; {} memory; activations {}", info.name, info.detail.empty() ? "" : "; " + info.detail,
                            memory_name(info.memory), layouts)};
}

Verdict check_ops(const Backend& backend) {
  std::string missing_f32;
  for (const Op op : kAllOps) {
    if (!backend.supports(op, DType::f32)) missing_f32 += (missing_f32.empty() ? "" : ", ") + std::string(op_name(op));
  }
  if (!missing_f32.empty()) {
    return {false, fmt::format("supports(op, f32) is false for {}: every op is required in f32 (models refuse to "
                               "build on a backend that lacks one)",
                               missing_f32)};
  }
  std::string found = fmt::format("all {} ops in f32", kOpCount);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    std::size_t count = 0;
    for (const Op op : kAllOps) count += backend.supports(op, dtype) ? 1 : 0;
    found += fmt::format("; {} of {} in {}", count, kOpCount, dtype_name(dtype));
  }
  return {true, found};
}

// ---- memory ----------------------------------------------------------------------------------

/// A host tensor of `shape` whose elements are finite and differ from their neighbours, so a
/// copy that drops, repeats or reorders elements changes its bytes (encoded by the op suite's
/// host_data.hpp, which rounds to bf16 the same way the suite's references do).
Tensor pattern(const Shape& shape, DType dtype) {
  const bool integral = dtype == DType::u8 || dtype == DType::i32;
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = integral ? static_cast<double>((i * 7 + 3) % 251) : static_cast<double>(i % 4093) * 0.25 - 511.0;
  }
  return conformance::encode(values, shape, dtype, Layout::row_major);
}

/// The first element where `a` and `b` differ, or -1.
std::int64_t first_difference(const Tensor& a, const Tensor& b) {
  const std::size_t size = dtype_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.data());
  const auto* pb = static_cast<const unsigned char*>(b.data());
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + static_cast<std::size_t>(i) * size, pb + static_cast<std::size_t>(i) * size, size) != 0) return i;
  }
  return -1;
}

Tensor allocate_checked(Backend& backend, const Shape& shape, DType dtype, MemoryKind where) {
  Tensor t = backend.allocate(shape, dtype, where);
  if (!t.defined() || t.shape() != shape || t.dtype() != dtype) {
    throw Error(fmt::format("allocate({}, {}, {}) returned {}", shape_string(shape), dtype_name(dtype),
                            memory_name(where), t.defined() ? t.describe() : "an undefined tensor"));
  }
  return t;
}

Verdict check_memory(Backend& backend) {
  int cases = 0;
  for (const DType dtype : {DType::f32, DType::bf16, DType::u8, DType::i32}) {
    for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1000003}}) {
      const Shape shape{n};
      const std::string what = fmt::format("{} x {}", dtype_name(dtype), n);
      const auto compare = [&](const Tensor& got, const Tensor& want, const std::string& path) -> std::string {
        const std::int64_t at = first_difference(got, want);
        return at < 0 ? "" : fmt::format("{}: {} changed element {} (bytes differ)", what, path, at);
      };
      for (const MemoryKind source_kind : {MemoryKind::host, MemoryKind::host_pinned}) {
        Tensor source = pattern(shape, dtype);
        if (source_kind == MemoryKind::host_pinned) {
          const Tensor pinned = allocate_checked(backend, shape, dtype, source_kind);
          std::memcpy(pinned.data(), source.data(), source.bytes());
          source = pinned;
        }
        const Tensor device = allocate_checked(backend, shape, dtype, MemoryKind::device);
        const Tensor device2 = allocate_checked(backend, shape, dtype, MemoryKind::device);
        const Tensor back = conformance::poison_image(shape, dtype);
        backend.copy(source, device);
        backend.copy(device, device2);
        backend.copy(device2, back);
        const std::string path = fmt::format("copy {} -> device -> device -> host", memory_name(source_kind));
        if (const std::string wrong = compare(back, source, path); !wrong.empty()) return {false, wrong};
        ++cases;
      }
      const Tensor source = pattern(shape, dtype);
      const Tensor on_device = backend.to_device(source);
      const Tensor back = conformance::poison_image(shape, dtype);
      backend.copy(on_device, back);
      backend.synchronize();
      if (const std::string wrong = compare(back, source, "to_device then copy to host"); !wrong.empty()) {
        return {false, wrong};
      }
      const Tensor filled = allocate_checked(backend, shape, dtype, MemoryKind::device);
      backend.fill(filled, 3.0);
      const Tensor threes =
          conformance::encode(std::vector<double>(static_cast<std::size_t>(n), 3.0), shape, dtype, Layout::row_major);
      backend.copy(filled, back);
      if (const std::string wrong = compare(back, threes, "fill(3) on device then copy to host"); !wrong.empty()) {
        return {false, wrong};
      }
      cases += 2;
    }
  }
  return {true, fmt::format("allocate, copy host and pinned -> device -> device -> host, to_device and fill keep "
                            "every byte: f32, bf16, u8, i32 x 1 and 1000003 elements, {} cases",
                            cases)};
}

Verdict check_events(Backend& backend) {
  const Shape shape{1 << 20};
  const Tensor t = allocate_checked(backend, shape, DType::f32, MemoryKind::device);
  backend.fill(t, 1.0);
  const std::shared_ptr<Event> computed = backend.record_event(StreamKind::compute);
  if (computed == nullptr) return {false, "record_event(compute) returned null"};
  computed->synchronize();
  backend.wait_event(StreamKind::communication, *computed);
  const std::shared_ptr<Event> communicated = backend.record_event(StreamKind::communication);
  if (communicated == nullptr) return {false, "record_event(communication) returned null"};
  communicated->synchronize();
  backend.wait_event(StreamKind::compute, *communicated);
  const Tensor back = host_tensor(shape, DType::f32);
  backend.copy(t, back);
  const float* p = back.data_as<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != 1.0f) return {false, fmt::format("fill(1) then an event's synchronize(): element {} is {}", i, p[i])};
  }
  backend.synchronize();
  return {true, "record_event and Event::synchronize on both streams, wait_event between them"};
}

/// allocate(), copy() into host memory, supports() and Event::synchronize() from loader-like
/// threads while the trainer thread computes (kiln/backend.hpp allows exactly these from other
/// threads: a loader worker stages a batch in pinned memory and waits for the upload's event).
/// A data race shows as a wrong value, an exception or (under a sanitizer) a report.
Verdict check_threads(Backend& backend) {
  constexpr int kThreads = 4, kRounds = 50;
  // The event of the trainer thread's latest matmul, which the workers wait for.
  std::mutex event_mutex;
  std::shared_ptr<Event> latest = backend.record_event(StreamKind::compute);
  if (latest == nullptr) return {false, "record_event(compute) returned null"};
  std::atomic<int> waits{0};
  std::atomic<int> failures{0};
  std::string first_failure;
  std::atomic_flag failure_taken = ATOMIC_FLAG_INIT;
  const auto fail = [&](std::string why) {
    ++failures;
    if (!failure_taken.test_and_set()) first_failure = std::move(why);
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([&, w] {
      try {
        for (int round = 0; round < kRounds; ++round) {
          const Shape shape{257 + w};
          const Tensor staging = allocate_checked(backend, shape, DType::f32, MemoryKind::host_pinned);
          const Tensor source = pattern(shape, DType::f32);
          backend.copy(source, staging);
          if (const std::int64_t at = first_difference(staging, source); at >= 0) {
            return fail(fmt::format("thread {} round {}: copy into pinned host memory changed element {}", w, round, at));
          }
          if (!backend.supports(Op::matmul, DType::f32)) return fail("supports(matmul, f32) was false from a thread");
          std::shared_ptr<Event> event;
          {
            const std::lock_guard lock(event_mutex);
            event = latest;
          }
          event->synchronize();
          ++waits;
        }
      } catch (const std::exception& e) {
        fail(fmt::format("thread {} threw: {}", w, e.what()));
      }
    });
  }
  // The trainer's thread meanwhile: c = a b with a, b all ones, so every element of c is k.
  std::string trainer_failure;
  try {
    constexpr std::int64_t m = 64, n = 64, k = 96;
    const Tensor a = allocate_checked(backend, {m, k}, DType::f32, MemoryKind::device);
    const Tensor b = allocate_checked(backend, {k, n}, DType::f32, MemoryKind::device);
    const Tensor c = allocate_checked(backend, {m, n}, DType::f32, MemoryKind::device);
    backend.fill(a, 1.0);
    backend.fill(b, 1.0);
    const Tensor back = host_tensor({m, n}, DType::f32);
    for (int round = 0; round < 20 && trainer_failure.empty(); ++round) {
      backend.matmul(c, a, Transpose::no, b, Transpose::no, 1.0f, 0.0f, Tensor());
      std::shared_ptr<Event> event = backend.record_event(StreamKind::compute);
      if (event == nullptr) {
        trainer_failure = "record_event(compute) returned null after a matmul";
        break;
      }
      {
        const std::lock_guard lock(event_mutex);
        latest = std::move(event);
      }
      backend.copy(c, back);
      const float* p = back.data_as<float>();
      for (std::int64_t i = 0; i < m * n; ++i) {
        if (p[i] != static_cast<float>(k)) {
          trainer_failure = fmt::format("the trainer thread's matmul gave {} at element {}, not {}", p[i], i, k);
          break;
        }
      }
    }
  } catch (const std::exception& e) {
    trainer_failure = std::string("the trainer thread's matmul threw: ") + e.what();
  }
  for (auto& worker : workers) worker.join();
  if (!trainer_failure.empty()) return {false, trainer_failure};
  if (failures > 0) return {false, fmt::format("{} of {} threads failed; first: {}", failures.load(), kThreads, first_failure)};
  return {true, fmt::format("{} threads x {} rounds of allocate(pinned), copy, supports() and a wait for the latest "
                            "matmul's event ({} waits) during 20 matmuls",
                            kThreads, kRounds, waits.load())};
}

// ---- the op suite ----------------------------------------------------------------------------

/// "f32, bf16, f16" or "f32, bf16, f16 x nchw, nhwc": what a group runs over.
std::string axes_label(const conformance::CaseSpec& spec) {
  if (spec.axes == conformance::Axes::f32_only) return "f32";
  if (spec.axes == conformance::Axes::dtypes) return "f32, bf16, f16";
  return "f32, bf16, f16 x nchw, nhwc";
}

/// One line for a case group: every variant the backend supports run and judged.
CheckLine check_case_group(Backend& backend, const conformance::CaseSpec& spec) {
  CheckLine line{false, spec.suite, ""};
  std::vector<std::string> skipped, ran_names, failures;
  std::size_t judged = 0, refusals = 0, failed = 0;
  double worst_ratio = -1.0;
  std::string worst;
  for (const conformance::Variant& variant : conformance::variants_of(spec)) {
    const conformance::VariantResult result = conformance::run_variant(backend, spec, variant);
    if (!result.skipped.empty()) {
      skipped.push_back(result.name);
      continue;
    }
    ran_names.push_back(result.name);
    if (!result.threw.empty()) failures.push_back(fmt::format("{} threw: {}", result.name, result.threw));
    if (result.threw.empty() && result.checks.empty()) failures.push_back(result.name + " judged nothing");
    for (const conformance::CheckResult& check : result.checks) {
      ++(check.refusal ? refusals : judged);
      if (!check.ok) {
        ++failed;
        if (failures.empty()) failures.push_back(result.name + ": " + check.message);
      } else if (check.tolerance > 0.0 && check.error / check.tolerance > worst_ratio) {
        worst_ratio = check.error / check.tolerance;
        worst = fmt::format("{:.2g} in {}, tolerance {:.0g}", check.error, result.name, check.tolerance);
      }
    }
  }
  const std::size_t variants = conformance::variants_of(spec).size();
  if (skipped.size() == variants) {
    line.ok = true;
    line.skipped = true;
    line.detail = conformance::unsupported_reason(backend, spec, conformance::variants_of(spec).front());
    return line;
  }
  const std::string not_run =
      skipped.empty() ? "" : fmt::format("; not supported, not run: {}", fmt::join(skipped, ", "));
  if (!failures.empty()) {
    line.detail = fmt::format("{} of {} outputs wrong; {}{}", failed, judged + refusals, fmt::join(failures, "; "), not_run);
    return line;
  }
  line.ok = true;
  // What ran: the group's whole axes when nothing was skipped, else the variants themselves.
  const std::string ran = skipped.empty() ? axes_label(spec) : fmt::format("{}", fmt::join(ran_names, ", "));
  const std::string refused = refusals == 0 ? "" : fmt::format(", and {} bad calls are refused by name", refusals);
  line.detail = fmt::format("{}: {} outputs match the float64 reference{}{}{}", ran, judged,
                            worst.empty() ? " exactly" : " (largest relative error " + worst + ")", refused, not_run);
  return line;
}

}  // namespace

std::vector<CheckLine> check_backend(Backend& backend) {
  std::vector<CheckLine> lines;
  lines.push_back(run_check("device", [&] { return check_device(backend); }));
  lines.push_back(run_check("ops", [&] { return check_ops(backend); }));
  lines.push_back(run_check("memory", [&] { return check_memory(backend); }));
  if (!lines.back().ok) {
    // Every op check moves its data with allocate and copy: without them nothing below means anything.
    lines.push_back(CheckLine{true, "suite", "not run: the op checks move their data with allocate() and copy()", true});
    return lines;
  }
  lines.push_back(run_check("events", [&] { return check_events(backend); }));
  lines.push_back(run_check("threads", [&] { return check_threads(backend); }));
  for (const conformance::CaseSpec& spec : conformance::all_cases()) lines.push_back(check_case_group(backend, spec));
  return lines;
}

}  // namespace kiln::cli
