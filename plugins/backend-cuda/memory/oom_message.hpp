// The out-of-memory message, in one place for the device allocator (through throw_out_of_memory)
// and the allocator tests (a fake device with made-up free/total figures). Plain C++.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::cuda {

/// "<what>: out of GPU memory asking for 512.0 MiB on device 0 (100.0 MiB free of 80.0 GiB...";
/// ends with the hint to lower the per-rank batch or the precision.
std::string format_out_of_memory(std::string_view what, std::size_t asked, int device,
                                 std::size_t free_bytes, std::size_t total_bytes);

}  // namespace kiln::cuda
