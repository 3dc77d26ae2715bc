// libFuzzer's entry point for one target, chosen at compile time (KILN_FUZZ_TARGET, its name):
// scripts/fuzz.sh builds one executable per target with clang's -fsanitize=fuzzer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_target.hpp"

namespace {

const kiln::fuzz::Target& chosen() {
  static const kiln::fuzz::Target* target = [] {
    for (const auto& t : kiln::fuzz::all_targets())
      if (t.name == std::string_view(KILN_FUZZ_TARGET)) return &t;
    kiln::fuzz::finding("no fuzz target named " KILN_FUZZ_TARGET);
  }();
  return *target;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)chosen().run({data, size});
  return 0;
}
