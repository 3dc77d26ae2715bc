// ResNet-50's 1x1 stride-1 convolutions at batch 8, two ways on oneDNN 2.6 (Debian's; the 2.x API):
//
//  (a) "conv": a convolution primitive built as Kiln's cpu backend builds it
//      (plugins/backend-cpu/ops/conv2d.cpp): nhwc activations, format_tag::any weights, backward
//      primitives hinted by a forward_training descriptor, bf16 backward-weights writing f32
//      diff_weights. Plus its weight edges, timed as oneDNN reorders: the plain OIHW weights
//      (compute dtype) pulled into the primitive's blocked layout before forward and
//      backward-data ("pull"), and the blocked f32 diff_weights added into the plain OIHW gradient
//      after backward-weights (a reorder with a sum post-op, Accumulate::yes; "push"). The
//      backend's own loops for those edges (ops/plain_to_blocked*, ops/blocked_to_plain.cpp) are
//      about 2x faster than these reorders (bench/weight_pull); built with -DKILN_EDGES (run.sh:
//      KILN_EDGES=1) the edges are those loops, compiled in, where the backend uses them.
//  (b) "matmul": the same convolution as a matmul over M = N*H*W rows, every operand the plain
//      tensor itself, described by strides, so there are no edges at all:
//        forward           Y[M,K]  = X[M,C] * W^T       (W = OIHW = [K,C] row-major, read as [C,K] via strides)
//        backward-data     dX[M,C] = dY[M,K] * W[K,C]
//        backward-weights  dW[K,C] += dY^T[K,M] * X[M,C] (dY read transposed via strides; sum post-op)
//
// Each shape and direction builds both, then times them alternately (a, b, a, b, ...) --reps
// times after one warm-up each, so a load change on a shared machine hits both alike; a layer's
// figure is the median. Totals weight each shape by how often it occurs in ResNet-50.
// Output: "layer ..." lines with --layers, then "total <dtype> <direction> <conv> <edge> <matmul>"
// (ms per training step's worth of that direction) and the implementation names ("impl ...").
#include <oneapi/dnnl/dnnl.hpp>

#include "../common/bench_clock.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <functional>
#include <vector>

#ifdef KILN_EDGES
#include "ops/blocked_to_plain.hpp"
#include "ops/plain_to_blocked.hpp"
#endif

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using Args = std::unordered_map<int, dnnl::memory>;

struct Shape {
  const char* name;
  int count;  // how often the shape occurs in ResNet-50
  std::int64_t c, h, k;
};

// The 1x1 stride-1 rows of bench/onednn_versions/conv_bench.cpp's kShapes (torchvision's
// ResNet-50 v1.5, 224x224 input): 32 of its 53 convolutions. The stride-2 downsample 1x1s are
// strided matmuls over a subsampled input and are not part of this comparison.
const std::vector<Shape> kShapes = {
    {"l1 1x1 64->64 @56", 1, 64, 56, 64},        {"l1 1x1 256->64 @56", 2, 256, 56, 64},
    {"l1 1x1 64->256 @56 (+ds)", 4, 64, 56, 256}, {"l2 1x1 256->128 @56", 1, 256, 56, 128},
    {"l2 1x1 512->128 @28", 3, 512, 28, 128},    {"l2 1x1 128->512 @28", 4, 128, 28, 512},
    {"l3 1x1 512->256 @28", 1, 512, 28, 256},    {"l3 1x1 1024->256 @14", 5, 1024, 14, 256},
    {"l3 1x1 256->1024 @14", 6, 256, 14, 1024},  {"l4 1x1 1024->512 @14", 1, 1024, 14, 512},
    {"l4 1x1 2048->512 @7", 2, 2048, 7, 512},    {"l4 1x1 512->2048 @7", 3, 512, 7, 2048},
};

// --clock cpu: time with the CPU clock (bench/common/bench_clock.hpp says when that helps).
bool g_cpu_clock = false;

double now_ms() { return kiln_bench::now_ms(g_cpu_clock); }

dnnl::memory filled(const dnnl::memory::desc& d, const dnnl::engine& eng, std::mt19937& rng) {
  dnnl::memory m(d, eng);
  // Valid finite values in f32 and bf16 alike: bf16 patterns of floats in [-1, 1) (as f32, the
  // upper halves of the words, the lower halves zero).
  auto* p = static_cast<std::uint16_t*>(m.get_data_handle());
  const std::size_t n16 = d.get_size() / 2;
  const bool f32 = d.data_type() == dt::f32;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t i = 0; i < n16; ++i) {
    const float f = u(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    p[i] = (f32 && i % 2 == 0) ? 0 : static_cast<std::uint16_t>(bits >> 16);
  }
  return m;
}

/// One timed thing: a sequence of steps (e.g. a weight pull then the convolution).
struct Job {
  std::vector<std::function<void(dnnl::stream&)>> steps;
  Job() = default;
  Job(dnnl::primitive p, Args a) {
    steps.push_back([p = std::move(p), a = std::move(a)](dnnl::stream& s) { p.execute(s, a); });
  }
  double run(dnnl::stream& s) const {
    const double t0 = now_ms();
    for (const auto& step : steps) step(s);
    s.wait();
    return now_ms() - t0;
  }
};

/// The weight pull: the plain OIHW weights into the primitive's blocked layout (Kiln's loop with
/// -DKILN_EDGES where the backend has a vector kernel for the layout, else oneDNN's reorder).
Job pull_job(const dnnl::memory& plain, const dnnl::memory& blocked) {
#ifdef KILN_EDGES
  if (kiln::cpu::PlainToBlocked::handles(plain.get_desc(), blocked.get_desc())) {
    auto loop = std::make_shared<kiln::cpu::PlainToBlocked>(plain.get_desc(), blocked.get_desc());
    if (loop->vectorised()) {
      Job j;
      j.steps.push_back([loop, plain, blocked](dnnl::stream&) {
        loop->run(plain.get_data_handle(), blocked.get_data_handle());
      });
      return j;
    }
  }
#endif
  return Job(dnnl::reorder(plain, blocked), {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, blocked}});
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Times the jobs alternately, reps rounds after one warm-up round; the median of each.
std::vector<double> interleaved(const std::vector<Job>& jobs, dnnl::stream& s, int reps) {
  std::vector<std::vector<double>> t(jobs.size());
  for (const Job& j : jobs) j.run(s);
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < jobs.size(); ++i) t[i].push_back(jobs[i].run(s));
  std::vector<double> out;
  for (auto& v : t) out.push_back(median(v));
  return out;
}

dnnl::memory::desc md(const dims& d, dt t, tag f) { return dnnl::memory::desc(d, t, f); }
dnnl::memory::desc strided(const dims& d, dt t, const dims& st) { return dnnl::memory::desc(d, t, st); }

dnnl::primitive_attr sum_attr() {
  dnnl::post_ops ops;
  ops.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}

dnnl::matmul::primitive_desc matmul_pd(const dnnl::engine& e, const dnnl::memory::desc& a,
                                       const dnnl::memory::desc& b, const dnnl::memory::desc& c,
                                       bool accumulate) {
  const dnnl::matmul::desc d(a, b, c);
  return accumulate ? dnnl::matmul::primitive_desc(d, sum_attr(), e) : dnnl::matmul::primitive_desc(d, e);
}

const char* type_name(dt t) { return t == dt::bf16 ? "bf16" : "f32"; }

std::vector<float> values(const dnnl::memory& m) {
  const dnnl::memory::desc d = m.get_desc();
  const std::size_t bytes = d.get_size();
  std::vector<float> out;
  if (d.data_type() == dt::f32) {
    out.resize(bytes / 4);
    std::memcpy(out.data(), m.get_data_handle(), bytes);
  } else {  // bf16
    const auto* p = static_cast<const std::uint16_t*>(m.get_data_handle());
    for (std::size_t i = 0; i < bytes / 2; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(p[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      out.push_back(f);
    }
  }
  return out;
}

/// --check: runs way (a), keeps its output, restores the output's old contents, runs way (b) and
/// prints the largest difference relative to the largest magnitude (both ways must compute the
/// same convolution before their times mean anything).
double check(const Job& a, const Job& b, const dnnl::memory& out, dnnl::stream& s) {
  const std::size_t bytes = out.get_desc().get_size();
  std::vector<char> before(bytes);
  std::memcpy(before.data(), out.get_data_handle(), bytes);
  a.run(s);
  const std::vector<float> ra = values(out);
  std::memcpy(out.get_data_handle(), before.data(), bytes);
  b.run(s);
  const std::vector<float> rb = values(out);
  double diff = 0, mag = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(ra[i] - rb[i])));
    mag = std::max(mag, static_cast<double>(std::fabs(ra[i])));
  }
  return diff / std::max(mag, 1e-30);
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 8, reps = 11;
  bool layers = false, checks = false;
  std::vector<dt> dtypes = {dt::f32, dt::bf16};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) batch = std::stoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--layers") layers = true;
    else if (a == "--check") checks = true;
    else if (a == "--clock" && i + 1 < argc) g_cpu_clock = std::string(argv[++i]) == "cpu";
    else if (a == "--dtype" && i + 1 < argc) {
      const std::string v = argv[++i];
      dtypes = v == "f32" ? std::vector<dt>{dt::f32} : v == "bf16" ? std::vector<dt>{dt::bf16} : dtypes;
    } else {
      std::fprintf(stderr, "usage: conv1x1_bench [--batch N] [--reps N] [--dtype f32|bf16|both] [--layers] [--check] [--clock wall|cpu]\n");
      return 2;
    }
  }
  const dnnl_version_t* v = dnnl_version();
#ifdef KILN_EDGES
  const char* edges = "Kiln's edge loops";
#else
  const char* edges = "oneDNN reorder edges";
#endif
  std::printf("onednn %d.%d.%d (%s), batch %d, %d reps, %s clock, %s\n", v->major, v->minor, v->patch, v->hash,
              batch, reps, g_cpu_clock ? "cpu" : "wall", edges);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  std::mt19937 rng(1);

  for (dt type : dtypes) {
    const dt dwt = dt::f32;  // Kiln's master gradient is f32 in both plans
    // Per direction: conv primitive, its weight edge, matmul.
    std::map<std::string, std::vector<double>> tot;
    std::map<std::string, int> impls;
    for (const Shape& sh : kShapes) {
      const std::int64_t n = batch, m = n * sh.h * sh.h, c = sh.c, k = sh.k;
      const dims src{n, c, sh.h, sh.h}, wei{k, c, 1, 1}, dst{n, k, sh.h, sh.h}, one{1, 1}, zero{0, 0};

      // (a) the convolution primitives, as conv2d.cpp builds them.
      const dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                               dnnl::algorithm::convolution_direct, md(src, type, tag::nhwc),
                                               md(wei, type, tag::any), md(dst, type, tag::nhwc), one, zero,
                                               zero, zero);
      const dnnl::convolution_forward::primitive_desc fpd(fd, eng);
      const dnnl::convolution_backward_data::desc bdd(dnnl::algorithm::convolution_direct,
                                                      md(src, type, tag::nhwc), md(wei, type, tag::any),
                                                      md(dst, type, tag::nhwc), one, zero, zero, zero);
      const dnnl::convolution_backward_data::primitive_desc bdpd(bdd, eng, fpd);
      const dnnl::convolution_backward_weights::desc bwd(dnnl::algorithm::convolution_direct,
                                                         md(src, type, tag::nhwc), md(wei, dwt, tag::any),
                                                         md(dst, type, tag::nhwc), one, zero, zero, zero);
      const dnnl::convolution_backward_weights::primitive_desc bwpd(bwd, eng, fpd);
      impls["fwd conv " + std::string(fpd.impl_info_str())]++;
      impls["bwd_d conv " + std::string(bdpd.impl_info_str())]++;
      impls["bwd_w conv " + std::string(bwpd.impl_info_str())]++;

      // The plain tensors both ways share: nhwc activations, OIHW weights and gradient.
      const dnnl::memory x = filled(md(src, type, tag::nhwc), eng, rng);
      const dnnl::memory y = filled(md(dst, type, tag::nhwc), eng, rng);
      const dnnl::memory dy = filled(md(dst, type, tag::nhwc), eng, rng);
      const dnnl::memory dx = filled(md(src, type, tag::nhwc), eng, rng);
      const dnnl::memory w = filled(md(wei, type, tag::oihw), eng, rng);
      const dnnl::memory dw = filled(md(wei, dwt, tag::oihw), eng, rng);
      // The blocked operands of the convolutions.
      const dnnl::memory wf(fpd.weights_desc(), eng), wd(bdpd.weights_desc(), eng);
      const dnnl::memory dwb = filled(bwpd.diff_weights_desc(), eng, rng);

      const Job conv_f(dnnl::convolution_forward(fpd), {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, wf}, {DNNL_ARG_DST, y}});
      const Job pull_f = pull_job(w, wf);
      const Job conv_d(dnnl::convolution_backward_data(bdpd),
                       {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, wd}, {DNNL_ARG_DIFF_SRC, dx}});
      const Job pull_d = pull_job(w, wd);
      const Job conv_w(dnnl::convolution_backward_weights(bwpd),
                       {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dwb}});
      // The weight-gradient push, dW += blocked result (Accumulate::yes).
      Job push_w;
#ifdef KILN_EDGES
      if (kiln::cpu::BlockedToPlain::handles(bwpd.diff_weights_desc(), md(wei, dwt, tag::oihw))) {
        auto loop = std::make_shared<kiln::cpu::BlockedToPlain>(bwpd.diff_weights_desc());
        push_w.steps.push_back([loop, dwb, dw](dnnl::stream&) {
          loop->run(static_cast<const float*>(dwb.get_data_handle()), static_cast<float*>(dw.get_data_handle()), true);
        });
      }
#endif
      if (push_w.steps.empty()) {
        const dnnl::reorder::primitive_desc push_pd(eng, bwpd.diff_weights_desc(), eng, md(wei, dwt, tag::oihw),
                                                    sum_attr());
        push_w = Job(dnnl::reorder(push_pd), {{DNNL_ARG_FROM, dwb}, {DNNL_ARG_TO, dw}});
      }

      // (b) the matmuls on the same plain memory (same handles, 2-D descriptors).
      const auto mfpd = matmul_pd(eng, strided({m, c}, type, {c, 1}), strided({c, k}, type, {1, c}),
                                  strided({m, k}, type, {k, 1}), false);
      const auto mdpd = matmul_pd(eng, strided({m, k}, type, {k, 1}), strided({k, c}, type, {c, 1}),
                                  strided({m, c}, type, {c, 1}), false);
      const auto mwpd = matmul_pd(eng, strided({k, m}, type, {1, k}), strided({m, c}, type, {c, 1}),
                                  strided({k, c}, dwt, {c, 1}), true);
      impls["fwd matmul " + std::string(mfpd.impl_info_str())]++;
      impls["bwd_d matmul " + std::string(mdpd.impl_info_str())]++;
      impls["bwd_w matmul " + std::string(mwpd.impl_info_str())]++;
      const auto as = [&](const dnnl::memory& mem, const dnnl::memory::desc& d) {
        return dnnl::memory(d, eng, mem.get_data_handle());
      };
      const Job mm_f(dnnl::matmul(mfpd), {{DNNL_ARG_SRC, as(x, mfpd.src_desc())},
                                          {DNNL_ARG_WEIGHTS, as(w, mfpd.weights_desc())},
                                          {DNNL_ARG_DST, as(y, mfpd.dst_desc())}});
      const Job mm_d(dnnl::matmul(mdpd), {{DNNL_ARG_SRC, as(dy, mdpd.src_desc())},
                                          {DNNL_ARG_WEIGHTS, as(w, mdpd.weights_desc())},
                                          {DNNL_ARG_DST, as(dx, mdpd.dst_desc())}});
      const Job mm_w(dnnl::matmul(mwpd), {{DNNL_ARG_SRC, as(dy, mwpd.src_desc())},
                                          {DNNL_ARG_WEIGHTS, as(x, mwpd.weights_desc())},
                                          {DNNL_ARG_DST, as(dw, mwpd.dst_desc())}});
      // Scratchpads: oneDNN 2.6's default (library-owned) mode, as in the backend.

      if (checks) {
        const auto cat = [](const Job& p, const Job& q) {
          Job j = p;
          j.steps.insert(j.steps.end(), q.steps.begin(), q.steps.end());
          return j;
        };
        std::printf("check %s %-26s max|diff|/max|conv|: fwd %.2e bwd_data %.2e bwd_weights(+=) %.2e\n",
                    type_name(type), sh.name, check(cat(pull_f, conv_f), mm_f, y, s),
                    check(cat(pull_d, conv_d), mm_d, dx, s), check(cat(conv_w, push_w), mm_w, dw, s));
        continue;
      }
      const std::vector<double> f = interleaved({conv_f, pull_f, mm_f}, s, reps);
      const std::vector<double> d = interleaved({conv_d, pull_d, mm_d}, s, reps);
      const std::vector<double> wt = interleaved({conv_w, push_w, mm_w}, s, reps);
      for (const auto& [dir, t] : {std::pair{"fwd", f}, std::pair{"bwd_data", d}, std::pair{"bwd_weights", wt}}) {
        auto& acc = tot[dir];
        acc.resize(3);
        for (int i = 0; i < 3; ++i) acc[i] += t[i] * sh.count;
        if (layers) {
          std::printf("layer %s %-26s x%d %-11s conv %7.3f edge %6.3f conv+edge %7.3f matmul %7.3f ratio %.2f\n",
                      type_name(type), sh.name, sh.count, dir, t[0], t[1], t[0] + t[1], t[2],
                      t[2] / (t[0] + t[1]));
        }
      }
    }
    for (const char* dir : {"fwd", "bwd_data", "bwd_weights"}) {
      if (checks) break;
      const auto& t = tot[dir];
      std::printf("total %s %s %.3f %.3f %.3f\n", type_name(type), dir, t[0], t[1], t[2]);
    }
    for (const auto& [name, count] : impls) std::printf("impl %s %s x%d\n", type_name(type), name.c_str(), count);
  }
  return 0;
}
