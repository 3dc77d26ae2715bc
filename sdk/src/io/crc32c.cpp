// CRC-32C: the SSE4.2 crc32 instruction 8 bytes at a time where available, else a 256-entry
// table for the reflected polynomial 0x82F63B78.
#include "kiln/sdk/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace kiln::io {
namespace {

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = make_table();

std::uint32_t crc_table(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc_hw(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  std::uint64_t c = crc;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<std::uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

}  // namespace

bool crc32c_hardware() noexcept {
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  return has_sse42;
#else
  return false;
#endif
}

std::uint32_t crc32c_portable(const void* data, std::size_t n) noexcept {
  return crc_table(0xFFFFFFFFu, static_cast<const unsigned char*>(data), n) ^ 0xFFFFFFFFu;
}

std::uint32_t crc32c(const void* data, std::size_t n) noexcept {
#if defined(__x86_64__)
  if (crc32c_hardware()) return crc_hw(0xFFFFFFFFu, static_cast<const unsigned char*>(data), n) ^ 0xFFFFFFFFu;
#endif
  return crc32c_portable(data, n);
}

std::uint32_t masked_crc32c(const void* data, std::size_t n) noexcept {
  const std::uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace kiln::io
