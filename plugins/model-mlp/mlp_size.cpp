// Parameter count and memory check of the mlp (see mlp_size.hpp).
#include "mlp_size.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <kiln/errors.hpp>
#include <kiln/sdk/checked_size.hpp>

namespace kiln::mlp {
namespace {

constexpr const char* kKeys = "model.in_features, model.hidden and model.num_classes";
constexpr const char* kHint = "use fewer or narrower layers";

std::string where_all(const ParamMap& p) {
  return fmt::format("{} ({}, {}, {})", kKeys, p.where("in_features"), p.where("hidden"), p.where("num_classes"));
}

}  // namespace

std::int64_t mlp_parameter_count(const ParamMap& p, std::int64_t in_features, const std::vector<std::int64_t>& hidden,
                                 std::int64_t classes) {
  const std::string what = "the mlp's parameter count from " + where_all(p);
  std::int64_t total = 0;
  std::int64_t width = in_features;
  auto add_linear = [&](std::int64_t out) {
    // weight (out, in) and bias (out)
    const std::int64_t layer = sdk::add_or_throw(sdk::mul_or_throw(width, out, what, kHint), out, what, kHint);
    total = sdk::add_or_throw(total, layer, what, kHint);
    width = out;
  };
  for (auto h : hidden) add_linear(h);
  add_linear(classes);
  return total;
}

void check_fits_in_memory(const ParamMap& p, std::int64_t parameters, std::uint64_t physical_bytes) {
  // f32 weights and gradients (ParameterStore keeps both in every precision) and the two moment
  // buffers of Adam, the default optimizer: what a step of the default run holds per parameter.
  constexpr std::size_t kBytesPerParameter = 4 * sizeof(float);
  const auto needed = sdk::checked_bytes(parameters, kBytesPerParameter);
  if (physical_bytes == 0 || (needed && *needed <= physical_bytes)) return;
  throw ConfigError(fmt::format(
      "{} give {} parameters, which need {} bytes for their f32 weights, gradients and Adam's two moments, more than this "
      "machine's {} bytes of physical memory; {}",
      where_all(p), parameters, needed ? fmt::format("{}", *needed) : std::string("more than 2^64"), physical_bytes,
      kHint));
}

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

}  // namespace kiln::mlp
