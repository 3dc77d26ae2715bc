// Where a ResNet-50 step's convolution time goes: every convolution shape of ResNet-50 v1.5 at
// batch 8 (torchvision's: stride on the 3x3s, 1x1 projections with the block's stride), planned
// on the cpu backend plugin with its default options, and each direction (forward, backward-data,
// backward-filter) timed --reps times after one warm-up, on the channels-last f32 tensors the
// model passes. Prints per shape the median ms and the GFLOP/s it makes (against the nominal
// 2 * N * K * C * R * S * P * Q, so Winograd layers read above the machine's peak and layers that
// skip the padding's taps below what they run at), and the per-step totals weighting each shape
// by its count (the stem's backward-data, which training never runs, left out), and which path
// each direction ran (the plugin's path counters: oneDNN's primitives, a matmul, a Winograd, Kiln's
// AVX2 kernels). `--a MODE` sets `conv_direct` (default "auto"); --b is ignored.
#include <cstdio>
#include <string>
#include <vector>

#include "../common/bench_clock.hpp"
#include "../common/cpu_plugin.hpp"
#include "../common/resnet50_convs.hpp"

using kiln::Tensor;

int main(int argc, char** argv) {
  const auto options = kiln_bench::parse_ab_options(argc, argv, {"", "auto", "auto"});
  if (!options) return 2;
  const auto& [plugin_path, mode_a, mode_b, batch, reps, threads] = *options;
  const kiln_bench::Plugin p(plugin_path);
  kiln_bench::Made a = kiln_bench::make_backend(p, "conv_direct", mode_a, threads);
  kiln::Backend& be = *a.backend;
  std::printf("# %s\n# batch %ld, %ld reps; ms (median) and GFLOP/s per direction\n", be.device().detail.c_str(),
              static_cast<long>(batch), static_cast<long>(reps));
  std::printf("%-28s %5s %8s %7s %8s %7s %8s %7s  %s\n", "layer", "count", "fwd", "GF/s", "bwd_d", "GF/s", "bwd_f",
              "GF/s", "paths fwd / bwd_d / bwd_f");
  double total[3] = {};
  for (const kiln_bench::ConvShape& l : kiln_bench::kResNet50Convs) {
    const kiln::Conv2dDesc d = kiln_bench::conv_desc(l, batch);
    auto plan = be.plan_conv2d(d);
    Tensor x = kiln_bench::activation(be, d.n, d.c, l.side), dx = kiln_bench::activation(be, d.n, d.c, l.side);
    Tensor y = kiln_bench::activation(be, d.n, d.k, d.out_h()), dy = kiln_bench::activation(be, d.n, d.k, d.out_h());
    Tensor w = kiln_bench::weights(be, l), dw = kiln_bench::weights(be, l);
    be.fill(x, 0.5), be.fill(dy, 0.25), be.fill(w, 0.01);
    const double flop = 2.0 * d.n * d.k * d.c * l.r * l.r * d.out_h() * d.out_h() / 1e9;
    double ms[3];
    std::string paths;
    for (int dir = 0; dir < 3; ++dir) {
      const auto before = kiln_bench::conv_paths(p, be);
      const auto run = [&] {
        if (dir == 0) be.conv2d_forward(*plan, y, x, w);
        else if (dir == 1) be.conv2d_backward_data(*plan, dx, dy, w);
        else be.conv2d_backward_filter(*plan, dw, dy, x, kiln::Accumulate::no);
      };
      run();
      std::vector<double> t;
      for (std::int64_t r = 0; r < reps; ++r) {
        const double t0 = kiln_bench::now_ms(false);
        run();
        t.push_back(kiln_bench::now_ms(false) - t0);
      }
      ms[dir] = kiln_bench::median(t);
      static const char* const kDirections[] = {"forward", "backward_data", "backward_filter"};
      paths += (dir ? " / " : "") + kiln_bench::grown_path(before, kiln_bench::conv_paths(p, be), kDirections[dir]);
      total[dir] += ms[dir] * static_cast<double>(l.count) * (dir == 1 && l.stem() ? 0 : 1);
    }
    char name[64];
    std::snprintf(name, sizeof name, "%ld->%ld %ld k%ld s%ld", static_cast<long>(l.c), static_cast<long>(l.k),
                  static_cast<long>(l.side), static_cast<long>(l.r), static_cast<long>(l.stride));
    std::printf("%-28s %5ld %8.2f %7.1f %8.2f %7.1f %8.2f %7.1f  %s\n", name, static_cast<long>(l.count), ms[0],
                flop / ms[0] * 1e3, ms[1], flop / ms[1] * 1e3, ms[2], flop / ms[2] * 1e3, paths.c_str());
  }
  std::printf("total ms per step: fwd %.1f bwd_data %.1f (no stem) bwd_filter %.1f\n", total[0], total[1], total[2]);
  return 0;
}
