// Splits a whole-buffer dtype conversion (f16_convert.hpp, bf16_convert.hpp) across the OpenMP
// team: chunks of whole vectors, one plain call below the size where a team costs more than it
// saves.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "parallel.hpp"

namespace kiln::cpu {

/// Runs body(begin, count) over [0, n) in chunks across the OpenMP team.
template <class Body>
void convert_in_chunks(std::size_t n, Body&& body) {
  constexpr std::size_t chunk = 8192;  // a multiple of every vector width; 32-48 KiB of traffic
  if (n <= static_cast<std::size_t>(kParallelMinElements)) {
    body(std::size_t{0}, n);
    return;
  }
  const auto chunks = static_cast<std::int64_t>((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * chunk;
    body(begin, std::min(chunk, n - begin));
  }
}

}  // namespace kiln::cpu
