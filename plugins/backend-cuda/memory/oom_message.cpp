// Out-of-memory message text (figures in MiB with one decimal so small requests stay visible).
#include "memory/oom_message.hpp"

#include <fmt/format.h>

namespace kiln::cuda {

std::string format_out_of_memory(std::string_view what, std::size_t asked, int device,
                                 std::size_t free_bytes, std::size_t total_bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format(
      "{}: out of GPU memory asking for {:.1f} MiB on device {} ({:.1f} MiB free of {:.1f} MiB); "
      "use a smaller per-rank batch (data.batch_size) or a lower precision",
      what, static_cast<double>(asked) / kMiB, device, static_cast<double>(free_bytes) / kMiB,
      static_cast<double>(total_bytes) / kMiB);
}

}  // namespace kiln::cuda
