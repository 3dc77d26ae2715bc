// ResNet-50's convolution backward-filters through the cpu backend plugin itself, two
// `conv_filter` modes side by side (default: "onednn" and "kiln_avx2"): every layer shape that no
// Winograd path computes (the 1x1s of both strides, the stride-2 3x3s, the two 7x7/512 3x3s;
// not the stem, whose 3 input channels Kiln's kernel does not take) is planned on both backends
// and its backward-filter (dw written) timed alternately on the two (a, b, a, b, ...) --reps times
// after one warm-up each, on the channels-last f32 tensors the ResNet model passes, so every edge
// and reorder the backend runs is inside the figure. A layer's figure is the median; the total
// weights each shape by how often ResNet-50 has it.
//
// Output: "layer <c>-><k> <side> k<r> s<stride> x<count> <ms a> <ms b> <a/b>" per shape, then
// "total <ms a> <ms b> <a/b>" (ms per training step's worth). run.sh builds and runs it.
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/bench_clock.hpp"
#include "../common/cpu_plugin.hpp"
#include "../common/resnet50_convs.hpp"

using kiln::Tensor;

int main(int argc, char** argv) {
  const auto options = kiln_bench::parse_ab_options(argc, argv, {"", "onednn", "kiln_avx2"});
  if (!options) return 2;
  const auto& [plugin_path, mode_a, mode_b, batch, reps, threads] = *options;
  const kiln_bench::Plugin p(plugin_path);
  kiln_bench::Made a = kiln_bench::make_backend(p, "conv_filter", mode_a, threads);
  kiln_bench::Made b = kiln_bench::make_backend(p, "conv_filter", mode_b, threads);
  std::printf("# a: %s\n# b: %s\n", a.backend->device().detail.c_str(), b.backend->device().detail.c_str());
  std::printf("# batch %ld, %ld reps, conv_filter a = %s, b = %s; backward-filter ms (median)\n",
              static_cast<long>(batch), static_cast<long>(reps), mode_a.c_str(), mode_b.c_str());
  double total[2] = {};
  for (const kiln_bench::ConvShape& l : kiln_bench::kResNet50Convs) {
    if (l.stem() || l.winograd()) continue;  // the shapes conv_filter's "auto" gives the kernel
    const kiln::Conv2dDesc d = kiln_bench::conv_desc(l, batch);
    kiln::Backend* backends[2] = {a.backend, b.backend};
    std::shared_ptr<kiln::OpPlan> plans[2] = {a.backend->plan_conv2d(d), b.backend->plan_conv2d(d)};
    struct Operands {
      Tensor x, dy, dw;
    } ops[2];
    for (int i = 0; i < 2; ++i) {
      kiln::Backend& be = *backends[i];
      ops[i] = {kiln_bench::activation(be, d.n, d.c, l.side), kiln_bench::activation(be, d.n, d.k, d.out_h()),
                kiln_bench::weights(be, l)};
      be.fill(ops[i].x, 0.5), be.fill(ops[i].dy, 0.25);
    }
    const auto run = [&](int i) {
      backends[i]->conv2d_backward_filter(*plans[i], ops[i].dw, ops[i].dy, ops[i].x, kiln::Accumulate::no);
    };
    run(0), run(1);  // warm-up: builds the primitives
    std::vector<double> times[2];
    for (std::int64_t r = 0; r < reps; ++r) {
      for (int i = 0; i < 2; ++i) {
        const double t0 = kiln_bench::now_ms(false);
        run(i);
        times[i].push_back(kiln_bench::now_ms(false) - t0);
      }
    }
    const double ma = kiln_bench::median(times[0]), mb = kiln_bench::median(times[1]);
    total[0] += ma * static_cast<double>(l.count), total[1] += mb * static_cast<double>(l.count);
    std::printf("layer %4ld->%-4ld %3ld k%ld s%ld x%ld %8.2f %8.2f %6.2f\n", static_cast<long>(l.c),
                static_cast<long>(l.k), static_cast<long>(l.side), static_cast<long>(l.r), static_cast<long>(l.stride),
                static_cast<long>(l.count), ma, mb, ma / mb);
  }
  std::printf("total %.1f %.1f %.2f\n", total[0], total[1], total[0] / total[1]);
  return 0;
}
