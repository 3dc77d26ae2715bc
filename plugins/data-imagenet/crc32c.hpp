// CRC-32C (Castagnoli) and TFRecord's masked form, for verifying TFRecord framing.
//
// crc32c() uses the SSE4.2 crc32 instruction (8 bytes per step) when the CPU has it, checked
// once at run time, and a byte-wise table otherwise; both give identical results
// (crc32c("123456789") = 0xE3069283). masked_crc32c() is TensorFlow's rotate-and-add mask.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::imagenet {

/// CRC-32C of `size` bytes, hardware path when available.
std::uint32_t crc32c(const void* data, std::size_t size) noexcept;
/// The table-driven implementation (exposed so tests can compare both paths).
std::uint32_t crc32c_portable(const void* data, std::size_t size) noexcept;
/// Whether crc32c() uses the SSE4.2 instruction on this CPU.
bool crc32c_hardware() noexcept;

/// TFRecord's mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8, mod 2^32.
constexpr std::uint32_t mask_crc(std::uint32_t crc) noexcept {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline std::uint32_t masked_crc32c(const void* data, std::size_t size) noexcept {
  return mask_crc(crc32c(data, size));
}

}  // namespace kiln::imagenet
