// CRC-32C (Castagnoli), as TFRecord and TensorBoard event files use it, with TensorFlow's mask.
// Hardware crc32 instructions (SSE4.2) when the CPU has them, a table otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::io {

/// CRC-32C of `n` bytes (init 0xFFFFFFFF, final xor 0xFFFFFFFF); crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t n) noexcept;
/// The table-driven path alone (exposed so tests can check both paths agree).
std::uint32_t crc32c_portable(const void* data, std::size_t n) noexcept;
/// Whether crc32c() uses the SSE4.2 instruction on this CPU.
bool crc32c_hardware() noexcept;
/// TensorFlow's masked form stored in record framing: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(const void* data, std::size_t n) noexcept;

}  // namespace kiln::io
