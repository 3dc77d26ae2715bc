// ResNet-50's stride-1 3x3 convolutions through the cpu backend plugin itself, two `conv3x3`
// modes side by side: each layer shape is planned on two backends (default: "direct" and
// "kiln_winograd"), and each direction (forward, backward-data, backward-filter writing dw) is
// timed alternately on the two (a, b, a, b, ...) --reps times after one warm-up each, on the
// same channels-last f32 tensors the ResNet model passes, so every edge, reorder and transform
// the backend runs is inside the figure. A layer's figure is the median; totals weight each
// shape by how often ResNet-50 has it (its 13 stride-1 3x3 layers: 3, 3, 5 and 2 per stage).
//
// Output: "layer <c> <side> <direction> <ms a> <ms b> <a/b>" per shape and direction, then
// "total <direction> <ms a> <ms b> <a/b>" per direction (ms per training step's worth).
// run.sh builds this against the build tree's SDK and runs it.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/bench_clock.hpp"
#include "../common/cpu_plugin.hpp"

namespace {

using kiln::Backend;
using kiln::Conv2dDesc;
using kiln::DType;
using kiln::Tensor;

/// The four stride-1 3x3 shapes of ResNet-50 v1.5 (channels in = out, side) and how many it has:
/// each stage's blocks but the first of stages 2-4, whose 3x3 has stride 2.
struct Layer {
  std::int64_t c, side, count;
};
constexpr Layer kLayers[] = {{64, 56, 3}, {128, 28, 3}, {256, 14, 5}, {512, 7, 2}};


}  // namespace

int main(int argc, char** argv) {
  const auto options = kiln_bench::parse_ab_options(argc, argv, {"", "direct", "kiln_winograd"});
  if (!options) return 2;
  const auto& [plugin_path, mode_a, mode_b, batch, reps, threads] = *options;
  const kiln_bench::Plugin p(plugin_path);
  kiln_bench::Made a = kiln_bench::make_backend(p, "conv3x3", mode_a, threads);
  kiln_bench::Made b = kiln_bench::make_backend(p, "conv3x3", mode_b, threads);
  std::printf("# a: %s\n# b: %s\n", a.backend->device().detail.c_str(), b.backend->device().detail.c_str());
  std::printf("# batch %ld, %ld reps, conv3x3 a = %s, b = %s\n", static_cast<long>(batch), static_cast<long>(reps),
              mode_a.c_str(), mode_b.c_str());

  const char* directions[] = {"forward", "backward_data", "backward_filter"};
  double total[3][2] = {};
  for (const Layer& l : kLayers) {
    Conv2dDesc d;
    d.n = batch, d.c = d.k = l.c, d.h = d.w = l.side, d.r = d.s = 3, d.pad_h = d.pad_w = 1;
    d.dtype = DType::f32;
    Backend* backends[2] = {a.backend, b.backend};
    std::shared_ptr<kiln::OpPlan> plans[2] = {a.backend->plan_conv2d(d), b.backend->plan_conv2d(d)};
    // One set of tensors per backend (each allocates its own), channels-last as the model's.
    struct Operands {
      Tensor x, w, y, dy, dx, dw;
    } ops[2];
    for (int i = 0; i < 2; ++i) {
      Backend& be = *backends[i];
      const auto act = [&](std::int64_t c) {
        return be.allocate({d.n, c, l.side, l.side}, DType::f32, kiln::MemoryKind::host).with_layout(kiln::Layout::nhwc);
      };
      ops[i] = {act(d.c), be.allocate({d.k, d.c, 3, 3}, DType::f32, kiln::MemoryKind::host), act(d.k), act(d.k),
                act(d.c), be.allocate({d.k, d.c, 3, 3}, DType::f32, kiln::MemoryKind::host)};
      be.fill(ops[i].x, 0.5), be.fill(ops[i].w, 0.01), be.fill(ops[i].dy, 0.25);
    }
    for (int dir = 0; dir < 3; ++dir) {
      const auto run = [&](int i) {
        Backend& be = *backends[i];
        Operands& o = ops[i];
        if (dir == 0) be.conv2d_forward(*plans[i], o.y, o.x, o.w);
        if (dir == 1) be.conv2d_backward_data(*plans[i], o.dx, o.dy, o.w);
        if (dir == 2) be.conv2d_backward_filter(*plans[i], o.dw, o.dy, o.x, kiln::Accumulate::no);
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
      total[dir][0] += ma * static_cast<double>(l.count);
      total[dir][1] += mb * static_cast<double>(l.count);
      std::printf("layer %ld %ld %s %.2f %.2f %.2f\n", static_cast<long>(l.c), static_cast<long>(l.side),
                  directions[dir], ma, mb, ma / mb);
    }
  }
  double all[2] = {};
  for (int dir = 0; dir < 3; ++dir) {
    std::printf("total %s %.1f %.1f %.2f\n", directions[dir], total[dir][0], total[dir][1], total[dir][0] / total[dir][1]);
    all[0] += total[dir][0], all[1] += total[dir][1];
  }
  std::printf("total all %.1f %.1f %.2f\n", all[0], all[1], all[0] / all[1]);
  return 0;
}
