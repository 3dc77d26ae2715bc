// ResNet-50's stride-1 1x1 convolutions at batch 8, backward-filter only (dW = dY^T X on
// channels-last tensors): Kiln's AVX2 kernel (plugins/backend-cpu/ops/gemm_tn_avx2.cpp, compiled
// in) against what oneDNN 2.6 offers for it: its backward-weights convolution (weights in the
// layout it picks, then the reorder to OIHW that Kiln's weight edge runs) and its matmul with the
// transposed operand read through strides. Per layer: the median of --reps interleaved
// repetitions, each on operands pushed out of the caches first (as in training, where the
// layer's tensors were written long before). Prints one line per layer and the per-step total
// (each layer times how often ResNet-50 has it). --check first compares each way's dW with a
// double-precision reference on a few entries.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/gemm_tn_avx2.hpp"

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Layer {
  long side, ic, oc, count;  // count: how many such layers one ResNet-50 step has
};

// Stride-1 1x1 layers of ResNet-50 v1.5 (torchvision) at 224x224: the projections of stages
// 2-4 have stride 2 and are not here.
const Layer kLayers[] = {{56, 64, 64, 1},    {56, 64, 256, 4},   {56, 256, 64, 2},   {56, 256, 128, 1},
                         {28, 128, 512, 4},  {28, 512, 128, 3},  {28, 512, 256, 1},  {14, 256, 1024, 6},
                         {14, 1024, 256, 5}, {14, 1024, 512, 1}, {7, 512, 2048, 3},  {7, 2048, 512, 2}};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 11;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--check") check = true;
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--check]\n", argv[0]);
      return 2;
    }
  }
  if (!kiln::cpu::cpu_runs_gemm_tn_avx2()) {
    std::printf("this CPU has no AVX2 and FMA: Kiln's kernel cannot run here\n");
    return 0;
  }
  const int threads = omp_get_max_threads();
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::vector<float> flush(32 << 20);  // 128 MiB: more than any L3 here
  std::printf("%-26s %9s %9s %12s %9s %8s %8s   (ms, median of %d; %d threads)\n", "layer (side ic->oc) x count",
              "kiln", "conv", "conv+reorder", "matmul", "c+r/kiln", "mm/kiln", reps, threads);
  double total[4] = {0, 0, 0, 0};
  for (const Layer& l : kLayers) {
    const long m = 8 * l.side * l.side, k = l.oc, c = l.ic;
    std::vector<float> dy(m * k), x(m * c), dw(k * c), dw_conv(k * c), dw_mm(k * c);
    std::srand(1);
    for (float& v : dy) v = std::rand() / float(RAND_MAX) - 0.5f;
    for (float& v : x) v = std::rand() / float(RAND_MAX) - 0.5f;
    std::vector<char> scratch_bytes(kiln::cpu::gemm_tn_scratch_bytes(m, k, c, threads) + 64);
    void* scratch = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(scratch_bytes.data()) + 63) & ~std::uintptr_t{63});
    const auto kiln = [&] { kiln::cpu::gemm_tn_avx2(m, k, c, dy.data(), kiln::cpu::GemmInput::f32, x.data(), kiln::cpu::GemmInput::f32,
                            dw.data(), false, scratch, threads); };

    // oneDNN's backward-weights convolution, hinted by a forward one, as Kiln's conv plans build it.
    const dnnl::memory::dims src{8, c, l.side, l.side}, dst{8, k, l.side, l.side}, wei{k, c, 1, 1};
    const auto src_d = dnnl::memory::desc(src, dt::f32, tag::nhwc), dst_d = dnnl::memory::desc(dst, dt::f32, tag::nhwc);
    const auto any_w = dnnl::memory::desc(wei, dt::f32, tag::any);
    const dnnl::convolution_forward::primitive_desc fwd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_d, any_w, dst_d, {1, 1}, {0, 0}, {0, 0}}, eng);
    const dnnl::convolution_backward_weights::primitive_desc bwd(
        {dnnl::algorithm::convolution_direct, src_d, any_w, dst_d, {1, 1}, {0, 0}, {0, 0}}, eng, fwd);
    dnnl::memory x_mem(src_d, eng, x.data()), dy_mem(dst_d, eng, dy.data()), w_blocked(bwd.diff_weights_desc(), eng);
    dnnl::memory w_plain(dnnl::memory::desc(wei, dt::f32, tag::oihw), eng, dw_conv.data());
    dnnl::convolution_backward_weights conv_prim(bwd);
    dnnl::reorder to_plain(w_blocked, w_plain);
    const auto conv = [&] {
      conv_prim.execute(st, {{DNNL_ARG_SRC, x_mem}, {DNNL_ARG_DIFF_DST, dy_mem}, {DNNL_ARG_DIFF_WEIGHTS, w_blocked}});
      st.wait();
    };
    const auto reorder = [&] {
      to_plain.execute(st, w_blocked, w_plain);
      st.wait();
    };
    // oneDNN's matmul dW[k][c] = dY^T X, dY read transposed through strides (conv1x1_matmul.cpp).
    const dnnl::memory::desc a_d({k, m}, dt::f32, dnnl::memory::dims{1, k}), b_d({m, c}, dt::f32, dnnl::memory::dims{c, 1});
    const dnnl::memory::desc o_d({k, c}, dt::f32, dnnl::memory::dims{c, 1});
    dnnl::matmul mm_prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_d, b_d, o_d), eng));
    dnnl::memory a_mem(a_d, eng, dy.data()), b_mem(b_d, eng, x.data()), o_mem(o_d, eng, dw_mm.data());
    const auto matmul = [&] {
      mm_prim.execute(st, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, o_mem}});
      st.wait();
    };

    if (check) {
      kiln();
      conv();
      reorder();
      matmul();
      double worst[3] = {0, 0, 0}, largest = 0;
      for (long i = 0; i < k; i += 7) {
        for (long j = 0; j < c; j += 5) {
          double want = 0;
          for (long r = 0; r < m; ++r) want += double(dy[r * k + i]) * x[r * c + j];
          largest = std::max(largest, std::abs(want));
          const float got[3] = {dw[i * c + j], dw_conv[i * c + j], dw_mm[i * c + j]};
          for (int w = 0; w < 3; ++w) worst[w] = std::max(worst[w], std::abs(want - got[w]));
        }
      }
      std::printf("check %2ld %4ld->%-4ld relative difference: kiln %.1e conv %.1e matmul %.1e\n", l.side, c, k,
                  worst[0] / largest, worst[1] / largest, worst[2] / largest);
    }

    const auto cold = [&] {
      for (float& v : flush) v += 1.0f;
    };
    const auto time = [&](const std::function<void()>& f) {
      cold();
      const auto t0 = std::chrono::steady_clock::now();
      f();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    kiln(), conv(), reorder(), matmul();  // first runs: page faults, JIT
    std::vector<double> tk, tc, tr, tm;
    for (int r = 0; r < reps; ++r) {
      tk.push_back(time(kiln));
      tc.push_back(time(conv));
      tr.push_back(time(reorder));  // right after conv, as the edge runs
      tm.push_back(time(matmul));
    }
    const double mk = median(tk), mc = median(tc), mr = median(tr), mm = median(tm);
    std::printf("%2ld %4ld->%-4ld x %ld %14s %9.3f %9.3f %12.3f %9.3f %8.2f %8.2f\n", l.side, c, k, l.count, "", mk, mc,
                mc + mr, mm, (mc + mr) / mk, mm / mk);
    total[0] += l.count * mk, total[1] += l.count * mc, total[2] += l.count * (mc + mr), total[3] += l.count * mm;
  }
  std::printf("%-26s %9.2f %9.2f %12.2f %9.2f %8.2f %8.2f\n", "per step (x count)", total[0], total[1], total[2],
              total[3], total[2] / total[0], total[3] / total[0]);
  std::printf("impl: conv %s\n", "oneDNN convolution_backward_weights (nhwc, weights any) + reorder to oihw");
  return 0;
}
