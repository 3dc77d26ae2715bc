// Which code computed each convolution call: one counter per direction and path, per backend.
//
// Why: a convolution call may run on any of six paths (oneDNN's direct or Winograd primitives, a
// 1x1 matmul, a strided 1x1's dense matmul, Kiln's Winograd, Kiln's AVX2 kernels), chosen per
// call from the backend's options, the shape and the tensors. Tests used to tell them apart by
// the bits each gives, which fails wherever two paths happen to sum in the same order (oneDNN's
// AVX-512 kernels on a Zen 4 and Kiln's AVX2 kernels did, for some shapes). The counters say it
// directly. They are read through the plugin's exported `kiln_cpu_conv_paths` (plugin.cpp), not
// through the Backend contract: they describe this backend's internals only.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

enum class ConvDirection : std::uint8_t { forward, backward_data, backward_filter };
inline constexpr std::array<const char*, 3> kConvDirectionNames{"forward", "backward_data", "backward_filter"};

/// The names are the backend options' values where one chooses the path (conv1x1 = "matmul",
/// conv3x3 = "kiln_winograd", conv_filter / conv_direct = "kiln_avx2").
enum class ConvPath : std::uint8_t {
  onednn,           // oneDNN's direct convolution primitive
  onednn_winograd,  // oneDNN's Winograd primitive (conv3x3 = winograd on AVX-512)
  matmul,           // a pointwise convolution as strided matmuls (conv1x1_matmul.hpp)
  strided_matmul,   // a strided 1x1's backward-data as one dense matmul (StridedPointwiseBackwardData)
  kiln_winograd,    // Kiln's AVX2 Winograd (winograd3x3.hpp)
  kiln_avx2,        // Kiln's AVX2 direct convolution or backward-filter kernel
};
inline constexpr std::array<const char*, 6> kConvPathNames{"onednn",         "onednn_winograd", "matmul",
                                                           "strided_matmul", "kiln_winograd",   "kiln_avx2"};

/// Calls per (direction, path). Relaxed atomics: one increment per convolution call, from
/// whichever thread calls the backend; readers want totals, not an order.
class ConvPathCounts {
 public:
  void add(ConvDirection d, ConvPath p) { at(d, p).fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t calls(ConvDirection d, ConvPath p) const { return at(d, p).load(std::memory_order_relaxed); }

 private:
  static std::size_t index(ConvDirection d, ConvPath p) {
    return static_cast<std::size_t>(d) * kConvPathNames.size() + static_cast<std::size_t>(p);
  }
  std::atomic<std::uint64_t>& at(ConvDirection d, ConvPath p) { return counts_[index(d, p)]; }
  const std::atomic<std::uint64_t>& at(ConvDirection d, ConvPath p) const { return counts_[index(d, p)]; }

  std::array<std::atomic<std::uint64_t>, kConvDirectionNames.size() * kConvPathNames.size()> counts_{};
};

}  // namespace kiln::cpu
