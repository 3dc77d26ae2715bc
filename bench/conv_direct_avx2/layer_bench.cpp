// ResNet-50's convolutions that Kiln's AVX2 direct convolution takes by default (the strided 3x3s
// and the two 7x7/512 3x3s, which Winograd leaves), forward and backward-data through the cpu
// backend plugin itself, two `conv_direct` modes side by side (default: "onednn" and
// "kiln_avx2"). Each layer is planned on both backends and each direction timed alternately on
// the two (a, b, a, b, ...) --reps times after one warm-up each, on the channels-last f32 tensors
// the ResNet model passes, so every edge and weight reorder is inside the figure. A figure is the
// median; the total weights each shape by how often ResNet-50 has it.
//
// Output: "layer <c>-><k> <side> k<r> s<stride> x<count> <direction> <ms a> <ms b> <a/b>" per
// shape and direction, then "total <ms a> <ms b> <a/b>" (ms per training step's worth).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/bench_clock.hpp"
#include "../common/cpu_plugin.hpp"
#include "../common/resnet50_convs.hpp"

using kiln::Tensor;

int main(int argc, char** argv) {
  // --cold is this benchmark's own flag; the rest are the shared A/B options.
  bool cold = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--cold") cold = true;
    else args.push_back(argv[i]);
  }
  std::vector<char> evict(cold ? 64u << 20 : 0);
  const auto options = kiln_bench::parse_ab_options(static_cast<int>(args.size()), args.data(), {"", "onednn", "kiln_avx2"});
  if (!options) return 2;
  const auto& [plugin_path, mode_a, mode_b, batch, reps, threads] = *options;
  const kiln_bench::Plugin p(plugin_path);
  kiln_bench::Made a = kiln_bench::make_backend(p, "conv_direct", mode_a, threads);
  kiln_bench::Made b = kiln_bench::make_backend(p, "conv_direct", mode_b, threads);
  std::printf("# a: %s\n# b: %s\n", a.backend->device().detail.c_str(), b.backend->device().detail.c_str());
  std::printf("# batch %ld, %ld reps, conv_direct a = %s, b = %s; ms (median)%s\n", static_cast<long>(batch),
              static_cast<long>(reps), mode_a.c_str(), mode_b.c_str(), cold ? "; caches flushed before each call" : "");
  double total[2] = {};
  for (const kiln_bench::ConvShape& l : kiln_bench::kResNet50Convs) {
    if (l.r != 3 || l.winograd()) continue;  // the shapes conv_direct's "auto" gives the kernel
    const kiln::Conv2dDesc d = kiln_bench::conv_desc(l, batch);
    kiln::Backend* backends[2] = {a.backend, b.backend};
    std::shared_ptr<kiln::OpPlan> plans[2] = {a.backend->plan_conv2d(d), b.backend->plan_conv2d(d)};
    struct Operands {
      Tensor x, y, dx, dy, w;
    } ops[2];
    for (int i = 0; i < 2; ++i) {
      kiln::Backend& be = *backends[i];
      ops[i] = {kiln_bench::activation(be, d.n, d.c, l.side), kiln_bench::activation(be, d.n, d.k, d.out_h()),
                kiln_bench::activation(be, d.n, d.c, l.side), kiln_bench::activation(be, d.n, d.k, d.out_h()),
                kiln_bench::weights(be, l)};
      be.fill(ops[i].x, 0.5), be.fill(ops[i].dy, 0.25), be.fill(ops[i].w, 0.01);
    }
    for (const char* direction : {"forward", "backward_data"}) {
      const bool fwd = std::string(direction) == "forward";
      const auto run = [&](int i) {
        if (fwd) backends[i]->conv2d_forward(*plans[i], ops[i].y, ops[i].x, ops[i].w);
        else backends[i]->conv2d_backward_data(*plans[i], ops[i].dx, ops[i].dy, ops[i].w);
      };
      run(0), run(1);  // warm-up: builds the primitives
      std::vector<double> times[2];
      for (std::int64_t r = 0; r < reps; ++r) {
        for (int i = 0; i < 2; ++i) {
          if (cold) std::memset(evict.data(), static_cast<int>(r + i), evict.size());
          const double t0 = kiln_bench::now_ms(false);
          run(i);
          times[i].push_back(kiln_bench::now_ms(false) - t0);
        }
      }
      const double ma = kiln_bench::median(times[0]), mb = kiln_bench::median(times[1]);
      total[0] += ma * static_cast<double>(l.count), total[1] += mb * static_cast<double>(l.count);
      std::printf("layer %4ld->%-4ld %3ld k%ld s%ld x%ld %-13s %8.2f %8.2f %6.2f\n", static_cast<long>(l.c),
                  static_cast<long>(l.k), static_cast<long>(l.side), static_cast<long>(l.r),
                  static_cast<long>(l.stride), static_cast<long>(l.count), direction, ma, mb, ma / mb);
    }
  }
  std::printf("total %.1f %.1f %.2f\n", total[0], total[1], total[0] / total[1]);
  return 0;
}
