// Hashing, naming and the process-wide cache of algo_key.hpp (plain C++, tested in CI).
// The hash mixes every field with the boost::hash_combine step; equality is the defaulted
// member-wise ==, so a collision can only cost a probe, never a wrong algorithm.
#include "dnn/algo_key.hpp"

#include <fmt/format.h>

namespace kiln::cuda {
namespace {

void mix(std::size_t& h, std::uint64_t v) noexcept {
  h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
}

std::uint64_t u(std::int64_t v) noexcept { return static_cast<std::uint64_t>(v); }

std::string_view layout_tag(Layout l) noexcept {
  switch (l) {
    case Layout::row_major: return "nchw";
    case Layout::nhwc: return "nhwc";
    case Layout::opaque: return "opaque";
  }
  return "?";
}

}  // namespace

std::string_view conv_direction_name(ConvDirection d) noexcept {
  switch (d) {
    case ConvDirection::forward: return "forward";
    case ConvDirection::backward_data: return "backward-data";
    case ConvDirection::backward_filter: return "backward-filter";
  }
  return "?";
}

std::string_view math_mode_name(MathMode m) noexcept {
  switch (m) {
    case MathMode::fp32: return "fp32";
    case MathMode::tf32: return "tf32";
    case MathMode::tensor_op: return "tensor_op";
    case MathMode::fp32_transforms: return "fp32_transforms";
  }
  return "?";
}

bool fma_math(MathMode m) noexcept { return m == MathMode::fp32 || m == MathMode::fp32_transforms; }

MathMode math_mode_for(DType dtype, bool allow_tf32, bool conv_transforms) noexcept {
  if (dtype == DType::f16 || dtype == DType::bf16) return MathMode::tensor_op;
  if (allow_tf32) return MathMode::tf32;
  return conv_transforms ? MathMode::fp32_transforms : MathMode::fp32;
}

ConvAlgoKey conv_algo_key(const Conv2dDesc& d, ConvDirection direction, int device, Layout layout,
                          MathMode math, AlgoSearch search, std::int64_t workspace_mib) {
  ConvAlgoKey k;
  k.device = device;
  k.direction = direction;
  k.n = d.n;
  k.c = d.c;
  k.h = d.h;
  k.w = d.w;
  k.k = d.k;
  k.r = d.r;
  k.s = d.s;
  k.stride_h = d.stride_h;
  k.stride_w = d.stride_w;
  k.pad_h = d.pad_h;
  k.pad_w = d.pad_w;
  k.dilation_h = d.dilation_h;
  k.dilation_w = d.dilation_w;
  k.groups = d.groups;
  k.dtype = d.dtype;
  k.layout = layout;
  k.math = math;
  k.search = search;
  k.workspace_mib = workspace_mib;
  return k;
}

std::string ConvAlgoKey::describe() const {
  return fmt::format("{} {} {} {} x({}, {}, {}, {}) k={} {}x{} stride {}x{} pad {}x{} dilation "
                     "{}x{} groups {} on device {} ({}, workspace <= {} MiB)",
                     conv_direction_name(direction), dtype_name(dtype), layout_tag(layout),
                     math_mode_name(math), n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w,
                     dilation_h, dilation_w, groups, device,
                     search == AlgoSearch::heuristic ? "heuristic" : "exhaustive", workspace_mib);
}

std::size_t ConvAlgoKeyHash::operator()(const ConvAlgoKey& k) const noexcept {
  std::size_t h = std::hash<int>{}(k.device);
  mix(h, static_cast<std::uint64_t>(k.direction) | static_cast<std::uint64_t>(k.dtype) << 8 |
             static_cast<std::uint64_t>(k.layout) << 16 | static_cast<std::uint64_t>(k.math) << 24 |
             static_cast<std::uint64_t>(k.search) << 32);
  for (std::int64_t v : {k.n, k.c, k.h, k.w, k.k, k.r, k.s, k.stride_h, k.stride_w, k.pad_h,
                         k.pad_w, k.dilation_h, k.dilation_w, k.groups, k.workspace_mib}) {
    mix(h, u(v));
  }
  return h;
}

AlgoChoice AlgoCache::get_or_select(const ConvAlgoKey& key,
                                    const std::function<AlgoChoice()>& select) {
  const std::lock_guard lock(mutex_);
  if (const auto it = map_.find(key); it != map_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  const AlgoChoice choice = select();
  map_.emplace(key, choice);
  return choice;
}

std::optional<AlgoChoice> AlgoCache::find(const ConvAlgoKey& key) const {
  const std::lock_guard lock(mutex_);
  if (const auto it = map_.find(key); it != map_.end()) return it->second;
  return std::nullopt;
}

void AlgoCache::store(const ConvAlgoKey& key, const AlgoChoice& choice) {
  const std::lock_guard lock(mutex_);
  map_.insert_or_assign(key, choice);
}

std::size_t AlgoCache::size() const {
  const std::lock_guard lock(mutex_);
  return map_.size();
}

std::size_t AlgoCache::hits() const {
  const std::lock_guard lock(mutex_);
  return hits_;
}

std::size_t AlgoCache::misses() const {
  const std::lock_guard lock(mutex_);
  return misses_;
}

void AlgoCache::clear() {
  const std::lock_guard lock(mutex_);
  map_.clear();
  hits_ = misses_ = 0;
}

AlgoCache& conv_algo_cache() {
  static AlgoCache* cache = new AlgoCache;  // never destroyed: plans may outlive static teardown
  return *cache;
}

std::string GemmKey::describe() const {
  return fmt::format("c {}({}, {}) = op(a) {}({}, {}){} x op(b) ({}, {}){}{} {} align {} on "
                     "device {}",
                     dtype_name(c), m, n, dtype_name(ab), m, k, ta == Transpose::yes ? "^T" : "",
                     k, n, tb == Transpose::yes ? "^T" : "",
                     bias == GemmBias::epilogue ? fmt::format(" + bias {}", dtype_name(bias_dtype))
                                                : std::string(),
                     math_mode_name(math), alignment, device);
}

std::size_t GemmKeyHash::operator()(const GemmKey& k) const noexcept {
  std::size_t h = std::hash<int>{}(k.device);
  mix(h, u(k.m));
  mix(h, u(k.n));
  mix(h, u(k.k));
  mix(h, static_cast<std::uint64_t>(k.ta) | static_cast<std::uint64_t>(k.tb) << 8 |
             static_cast<std::uint64_t>(k.ab) << 16 | static_cast<std::uint64_t>(k.c) << 24 |
             static_cast<std::uint64_t>(k.bias_dtype) << 32 |
             static_cast<std::uint64_t>(k.bias) << 40 | static_cast<std::uint64_t>(k.math) << 48);
  mix(h, k.alignment);
  return h;
}

std::uint32_t common_alignment(std::initializer_list<const void*> addresses) noexcept {
  std::uint32_t align = 16;
  for (const void* p : addresses) {
    if (p == nullptr) continue;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    while (align > 1 && a % align != 0) align /= 2;
  }
  return align;
}

}  // namespace kiln::cuda
