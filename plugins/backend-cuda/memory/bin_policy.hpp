// Size classes of the caching allocator: plain arithmetic, no CUDA, so CI tests it without a GPU.
//
// Small requests (up to 1 MiB) are rounded up to a multiple of 512 B and carved out of shared
// 2 MiB segments; large requests are rounded up to a multiple of 2 MiB and get a segment of
// their own. Coarse rounding of large blocks is what makes a block freed at one step fit the
// "same" request at the next (shapes repeat exactly, but arenas and workspaces drift a little),
// so the steady state is served from the cache. A cached block is split when the remainder is
// at least one unit of its class; the remainder stays cached on the same stream.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

enum class SizeClass : std::uint8_t { small = 0, large = 1 };

inline constexpr std::size_t kSmallUnit = 512;                ///< small-block granularity
inline constexpr std::size_t kSmallLimit = std::size_t{1} << 20;   ///< largest small request
inline constexpr std::size_t kLargeUnit = std::size_t{2} << 20;    ///< large-block granularity
inline constexpr std::size_t kSmallSegment = std::size_t{2} << 20; ///< segment small blocks share

/// `n` rounded up to a multiple of `unit` (unit > 0).
constexpr std::size_t round_up(std::size_t n, std::size_t unit) { return (n + unit - 1) / unit * unit; }

/// The block size that serves a request of `bytes` (0 bytes still gets one small unit, so every
/// tensor has a distinct, valid address).
std::size_t round_request(std::size_t bytes) noexcept;
/// Which pool a rounded block size belongs to.
SizeClass size_class(std::size_t rounded) noexcept;
/// Bytes to ask the device for when no cached block fits a rounded request.
std::size_t segment_bytes(std::size_t rounded) noexcept;
/// Whether a free block of `block` bytes chosen for a `wanted`-byte request (both rounded, same
/// class, block >= wanted) is split, leaving block - wanted bytes cached.
bool should_split(std::size_t block, std::size_t wanted) noexcept;

}  // namespace kiln::cuda
