// The data-source checks of `kiln plugins test` (see conformance.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "conformance.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/class_names.hpp"

namespace kiln::cli {
namespace {

constexpr std::uint64_t kSeed = 12345;
constexpr std::int64_t kThreadedSamples = 64;
constexpr int kThreads = 4;

struct Sample {
  std::vector<unsigned char> bytes;
  std::int32_t label = -1;
  bool operator==(const Sample&) const = default;
};

Sample read_sample(const DataSource& source, std::int64_t index, std::size_t bytes, unsigned char fill) {
  Sample s;
  s.bytes.assign(bytes, fill);
  s.label = -1;
  source.read(index, kSeed, SampleSlot{s.bytes.data(), bytes, &s.label});
  return s;
}

}  // namespace

std::vector<CheckLine> check_data(const DataSource& source) {
  std::vector<CheckLine> lines;
  DatasetInfo info;
  std::size_t bytes = 0;
  lines.push_back(run_check("describe", [&]() -> Verdict {
    info = source.describe();
    if (info.count < 1) return {false, fmt::format("count is {}: no samples", info.count)};
    if (info.sample_shape.empty()) return {false, "sample_shape is empty"};
    for (std::int64_t d : info.sample_shape) {
      if (d < 1) return {false, fmt::format("sample_shape {} has a dimension below 1", shape_string(info.sample_shape))};
    }
    if (!info.labeled) {
      // Images to predict on: no classes of their own (the model's checkpoint names them).
      if (info.num_classes != 0 || !info.class_names.empty()) {
        return {false, fmt::format("an unlabeled source (labeled = false) has num_classes {} and {} class names; "
                                   "it must have neither",
                                   info.num_classes, info.class_names.size())};
      }
    } else if (info.num_classes < 1) {
      return {false, fmt::format("num_classes is {}", info.num_classes)};
    }
    try {
      train::check_class_names(info, source.name(), "data.train");  // what a run would refuse
    } catch (const DataError& e) {
      return {false, e.what()};
    }
    bytes = static_cast<std::size_t>(shape_numel(info.sample_shape)) * dtype_size(info.sample_dtype);
    return {true, fmt::format("{} samples of {}{}, {}{}: {}", info.count, dtype_name(info.sample_dtype),
                              shape_string(info.sample_shape),
                              info.labeled ? fmt::format("{} classes", info.num_classes) : std::string("unlabeled"),
                              info.class_names.empty() ? "" : fmt::format(" ({} named)", info.class_names.size()),
                              info.description)};
  }));
  if (!lines.back().ok) return lines;

  lines.push_back(run_check("read", [&]() -> Verdict {
    const std::int64_t indices[] = {0, info.count / 2, info.count - 1};
    for (std::int64_t index : indices) {
      const Sample a = read_sample(source, index, bytes, 0x00), b = read_sample(source, index, bytes, 0xFF);
      if (a.bytes != b.bytes) {
        return {false, fmt::format("sample {} read twice with seed {} differs (or read() leaves bytes of the slot "
                                   "unwritten)",
                                   index, kSeed)};
      }
      if (a.label != b.label) return {false, fmt::format("sample {}'s label differs between two reads", index)};
      if (!info.labeled && a.label != 0) {
        return {false, fmt::format("sample {} of an unlabeled source has label {}; read() must write 0", index, a.label)};
      }
      if (info.labeled && (a.label < 0 || a.label >= info.num_classes)) {
        return {false, fmt::format("sample {} has label {}, outside [0, {})", index, a.label, info.num_classes)};
      }
      // kiln predict decides from sample 0 whether rows carry ids: all named or none, each stable.
      const std::string id = source.sample_id(index);
      if (id != source.sample_id(index)) return {false, fmt::format("sample_id({}) differs between two calls", index)};
      if (id.empty() != source.sample_id(0).empty()) {
        return {false, fmt::format("sample_id(0) is {} but sample_id({}) is {}: name every sample or none",
                                   source.sample_id(0).empty() ? "empty" : "not", index, id.empty() ? "empty" : "not")};
      }
      if (info.sample_dtype == DType::f32) {
        const auto* f = reinterpret_cast<const float*>(a.bytes.data());
        if (!std::all_of(f, f + bytes / sizeof(float), [](float v) { return std::isfinite(v); })) {
          return {false, fmt::format("sample {} holds non-finite values", index)};
        }
      }
    }
    return {true, fmt::format("samples 0, {} and {}: every byte written, the same for the same seed, labels in "
                              "range",
                              info.count / 2, info.count - 1)};
  }));
  if (!lines.back().ok) return lines;

  lines.push_back(run_check("threads", [&]() -> Verdict {
    const std::int64_t n = std::min(info.count, kThreadedSamples);
    std::vector<Sample> alone, together(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) alone.push_back(read_sample(source, i, bytes, 0x00));
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          for (std::int64_t i = t; i < n; i += kThreads) {
            together[static_cast<std::size_t>(i)] = read_sample(source, i, bytes, 0x00);
          }
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(t)] = e.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    for (const std::string& e : errors) {
      if (!e.empty()) return {false, fmt::format("read() threw on a worker thread: {}", e)};
    }
    for (std::int64_t i = 0; i < n; ++i) {
      if (!(together[static_cast<std::size_t>(i)] == alone[static_cast<std::size_t>(i)])) {
        return {false, fmt::format("sample {} read by {} threads at once differs from the same sample read alone: "
                                   "read() must be safe to call concurrently",
                                   i, kThreads)};
      }
    }
    return {true, fmt::format("{} samples read by {} threads at once equal those read one by one", n, kThreads)};
  }));
  return lines;
}

}  // namespace kiln::cli
