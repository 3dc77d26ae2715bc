// Counter-based random numbers shared by the core, the backends and data plugins.
//
// Every random decision in a run is a pure function of (seed, stream, counter), so results do
// not depend on thread count, worker count or device: the DataLoader derives a per-sample seed
// from (run seed, epoch, sample index), dropout derives each mask element from (seed, step,
// element index) identically on CPU and GPU. SplitMix64 finalisers are the mixing function:
// cheap, well distributed, and trivially portable to CUDA.
#pragma once

#include <cstdint>

namespace kiln {

/// SplitMix64 finaliser: a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Combines a seed with up to three counters into one well-mixed 64-bit value.
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0,
                                    std::uint64_t c = 0) noexcept {
  return mix64(mix64(mix64(seed ^ mix64(a)) ^ mix64(b + 0x632BE59BD9B4E019ull)) ^
               mix64(c + 0x8CB92BA72F3D8DD7ull));
}

/// Uniform float in [0, 1) from a 64-bit value (top 24 bits).
constexpr float unit_float(std::uint64_t bits) noexcept {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

/// A small sequential generator for plugin code that needs several numbers per sample
/// (crop, flip). Not thread-safe; make one per sample from the seed the DataLoader passes.
class SampleRng {
 public:
  explicit constexpr SampleRng(std::uint64_t seed) noexcept : state_(seed) {}
  constexpr std::uint64_t next_u64() noexcept { return mix64(state_++); }
  /// Uniform in [0, 1).
  constexpr float uniform() noexcept { return unit_float(next_u64()); }
  /// Uniform in [lo, hi).
  constexpr float uniform(float lo, float hi) noexcept { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n), n > 0.
  constexpr std::uint64_t below(std::uint64_t n) noexcept { return next_u64() % n; }

 private:
  std::uint64_t state_;
};

}  // namespace kiln
