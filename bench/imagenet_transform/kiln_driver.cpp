// Benchmark driver: loads the `imagenet` plugin through the registry (as `kiln train` does) and
// calls read() in a loop on one thread, printing {"images": n, "seconds": wall, "cpu_seconds":
// process CPU time} as JSON (CPU time is what "per core" means on a loaded machine).
//
// Usage: kiln_driver <plugin dir> <dataset root> <images> [transform]
// Seeds are derive_seed(1, 0, i) as the DataLoader would make them; the first pass over the
// dataset is a warm-up (page cache, thread-local scratch) and is not timed.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/rng.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <plugin dir> <dataset root> <images> [train|eval]\n", argv[0]);
    return 2;
  }
  try {
    kiln::plugin::Registry registry({std::filesystem::path(argv[1])});
    registry.scan();
    const auto& info = registry.require(KILN_KIND_DATA, "imagenet", "data.train");
    const std::string transform = argc > 4 ? argv[4] : "train";
    auto config = kiln::config::Config::parse(
        "[data.train]\ntype = \"imagenet\"\nroot = \"" + std::string(argv[2]) +
            "\"\ntransform = \"" + transform + "\"\n",
        "bench", {});
    config.plugin_type("data.train");
    const kiln::ParamMap params = config.validate("data.train", info.params);
    kiln::PluginArgs args;
    args.params = &params;
    auto source = registry.create_data(info, args);
    const auto desc = source->describe();
    const long images = std::atol(argv[3]);
    std::vector<float> pixels(3 * 224 * 224);
    std::int32_t label = 0;
    const kiln::SampleSlot slot{pixels.data(), pixels.size() * sizeof(float), &label};
    for (std::int64_t i = 0; i < desc.count; ++i) source->read(i, kiln::derive_seed(7, 0, i), slot);
    timespec cpu0{}, cpu1{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < images; ++i) {
      source->read(i % desc.count, kiln::derive_seed(1, 0, static_cast<std::uint64_t>(i)), slot);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    const double cpu = static_cast<double>(cpu1.tv_sec - cpu0.tv_sec) + 1e-9 * static_cast<double>(cpu1.tv_nsec - cpu0.tv_nsec);
    std::printf("{\"images\": %ld, \"seconds\": %.6f, \"cpu_seconds\": %.6f}\n", images, seconds, cpu);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln_driver: %s\n", e.what());
    return 1;
  }
  return 0;
}
