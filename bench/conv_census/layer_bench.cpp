// Where a ResNet-50 step's convolution time goes: every convolution shape of ResNet-50 v1.5 at
// batch 8 (torchvision's: stride on the 3x3s, 1x1 projections with the block's stride), planned
// on the cpu backend plugin with its default options, and each direction (forward, backward-data,
// backward-filter) timed --reps times after one warm-up, on the channels-last f32 tensors the
// model passes. Prints per shape the median ms and the GFLOP/s it makes (against the nominal
// 2 * N * K * C * R * S * P * Q, so Winograd layers read above the machine's peak and layers that
// skip the padding's taps below what they run at), and the per-step totals weighting each shape
// by its count (the stem's backward-data, which training never runs, left out). `--a MODE` sets
// `conv_direct` (default "auto"); --b is ignored.
#include <cstdio>
#include <string>
#include <vector>

#include "../common/bench_clock.hpp"
#include "../common/cpu_plugin.hpp"

namespace {
using kiln::Conv2dDesc;
using kiln::DType;
using kiln::Tensor;
struct Layer {
  std::int64_t c, k, side, r, stride, count;
};
constexpr Layer kLayers[] = {
    {3, 64, 224, 7, 2, 1},
    {64, 64, 56, 1, 1, 1},     {256, 64, 56, 1, 1, 2},   {64, 64, 56, 3, 1, 3},    {64, 256, 56, 1, 1, 4},
    {256, 128, 56, 1, 1, 1},   {128, 128, 56, 3, 2, 1},  {128, 512, 28, 1, 1, 4},  {256, 512, 56, 1, 2, 1},
    {512, 128, 28, 1, 1, 3},   {128, 128, 28, 3, 1, 3},
    {512, 256, 28, 1, 1, 1},   {256, 256, 28, 3, 2, 1},  {256, 1024, 14, 1, 1, 6}, {512, 1024, 28, 1, 2, 1},
    {1024, 256, 14, 1, 1, 5},  {256, 256, 14, 3, 1, 5},
    {1024, 512, 14, 1, 1, 1},  {512, 512, 14, 3, 2, 1},  {512, 2048, 7, 1, 1, 3},  {1024, 2048, 14, 1, 2, 1},
    {2048, 512, 7, 1, 1, 2},   {512, 512, 7, 3, 1, 2},
};
}  // namespace

int main(int argc, char** argv) {
  const auto options = kiln_bench::parse_ab_options(argc, argv, {"", "auto", "auto"});
  if (!options) return 2;
  const auto& [plugin_path, mode_a, mode_b, batch, reps, threads] = *options;
  const kiln_bench::Plugin p(plugin_path);
  kiln_bench::Made a = kiln_bench::make_backend(p, "conv_direct", mode_a, threads);
  kiln::Backend& be = *a.backend;
  std::printf("# %s\n# batch %ld, %ld reps; ms (median) and GFLOP/s per direction\n", be.device().detail.c_str(),
              static_cast<long>(batch), static_cast<long>(reps));
  std::printf("%-28s %5s %8s %7s %8s %7s %8s %7s\n", "layer", "count", "fwd", "GF/s", "bwd_d", "GF/s", "bwd_f", "GF/s");
  double total[3] = {};
  for (const Layer& l : kLayers) {
    Conv2dDesc d;
    d.n = batch, d.c = l.c, d.k = l.k, d.h = d.w = l.side, d.r = d.s = l.r;
    d.stride_h = d.stride_w = l.stride, d.pad_h = d.pad_w = l.r / 2, d.dtype = DType::f32;
    auto plan = be.plan_conv2d(d);
    const auto act = [&](std::int64_t c, std::int64_t side) {
      return be.allocate({d.n, c, side, side}, DType::f32, kiln::MemoryKind::host).with_layout(kiln::Layout::nhwc);
    };
    Tensor x = act(d.c, l.side), dx = act(d.c, l.side), y = act(d.k, d.out_h()), dy = act(d.k, d.out_h());
    Tensor w = be.allocate({d.k, d.c, l.r, l.r}, DType::f32, kiln::MemoryKind::host);
    Tensor dw = be.allocate({d.k, d.c, l.r, l.r}, DType::f32, kiln::MemoryKind::host);
    be.fill(x, 0.5), be.fill(dy, 0.25), be.fill(w, 0.01);
    const double flop = 2.0 * d.n * d.k * d.c * l.r * l.r * d.out_h() * d.out_h() / 1e9;
    double ms[3];
    for (int dir = 0; dir < 3; ++dir) {
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
      total[dir] += ms[dir] * static_cast<double>(l.count) * (dir == 1 && l.c == 3 ? 0 : 1);
    }
    char name[64];
    std::snprintf(name, sizeof name, "%ld->%ld %ld k%ld s%ld", static_cast<long>(l.c), static_cast<long>(l.k),
                  static_cast<long>(l.side), static_cast<long>(l.r), static_cast<long>(l.stride));
    std::printf("%-28s %5ld %8.2f %7.1f %8.2f %7.1f %8.2f %7.1f\n", name, static_cast<long>(l.count), ms[0],
                flop / ms[0] * 1e3, ms[1], flop / ms[1] * 1e3, ms[2], flop / ms[2] * 1e3);
  }
  std::printf("total ms per step: fwd %.1f bwd_data %.1f (no stem) bwd_filter %.1f\n", total[0], total[1], total[2]);
  return 0;
}
