// CRC-32C: reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF.
//
// The hardware path is compiled with a target attribute rather than -msse4.2 for the whole
// file, so the library still loads on a CPU without SSE4.2 and takes the table path there.
#include "crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define KILN_CRC32C_X86 1
#endif

namespace kiln::imagenet {
namespace {

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = make_table();

#ifdef KILN_CRC32C_X86
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(const void* data,
                                                              std::size_t size) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t crc = 0xFFFFFFFFu;
  while (size >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);  // unaligned-safe load
    crc = _mm_crc32_u64(crc, word);
    p += 8;
    size -= 8;
  }
  auto crc32 = static_cast<std::uint32_t>(crc);
  while (size-- > 0) crc32 = _mm_crc32_u8(crc32, *p++);
  return crc32 ^ 0xFFFFFFFFu;
}

bool detect_sse42() noexcept { return __builtin_cpu_supports("sse4.2"); }
#endif

}  // namespace

std::uint32_t crc32c_portable(const void* data, std::size_t size) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = kTable[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

bool crc32c_hardware() noexcept {
#ifdef KILN_CRC32C_X86
  static const bool has = detect_sse42();
  return has;
#else
  return false;
#endif
}

std::uint32_t crc32c(const void* data, std::size_t size) noexcept {
#ifdef KILN_CRC32C_X86
  if (crc32c_hardware()) return crc32c_sse42(data, size);
#endif
  return crc32c_portable(data, size);
}

}  // namespace kiln::imagenet
