// ResNet-50's 53 convolutions at batch 8 (224x224 input), timed directly on oneDNN: forward,
// backward-data and backward-weights, in f32 and bf16, built the way Kiln's cpu backend builds
// them (plugins/backend-cpu/ops/conv2d.cpp): activations nhwc, weights format_tag::any, the
// backward primitives hinted by a forward_training descriptor, bf16 backward-weights writing f32
// diff_weights (Kiln's master gradient is f32). The same source compiles against oneDNN 2.x
// (Debian's 2.6) and 3.x (PyPI's onednn-devel-cpu-gomp), whose primitive-descriptor API differs;
// run.sh builds both and runs them side by side.
//
// Per layer and direction it reports the median of --reps timed executions (after one warm-up)
// of the primitive alone, on memory in the layouts the primitive chose, and sums them over the
// network with each layer's multiplicity (conv1 has no backward-data, as in Kiln). With --edge it
// also times Kiln's weight edges as oneDNN reorders: after each backward-weights call the
// blocked f32 diff_weights added into the plain OIHW master gradient (a sum post-op, for
// Accumulate::yes; "dw_edge"; the cpu backend now does this in its own loop,
// plugins/backend-cpu/ops/blocked_to_plain.cpp), and before each forward and backward-data call
// the plain OIHW weights in the compute dtype reordered into the primitive's layout ("w_pull").
// --clock cpu, --bf16-diff-weights, --wact-any, --dw-plain and --winograd are explained in struct
// Options (--winograd: what the cpu backend's `conv3x3 = "winograd"` runs, with its reorders).
//
// Output: one line per layer and direction ("layer ...") with --layers, then one line per
// direction: "total <dtype> <direction> <ms per step>", and the implementation names.
#include <oneapi/dnnl/dnnl.hpp>

#include "../common/bench_clock.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Shape {
  const char* name;
  int count;  // how often the shape occurs in ResNet-50
  std::int64_t c, h, k, r, stride;
  bool bwd_data;  // conv1 needs no input gradient
  std::int64_t pad() const { return r / 2; }
  std::int64_t out() const { return (h + 2 * pad() - r) / stride + 1; }
};

// torchvision's ResNet-50 v1.5 (stride on the 3x3), 224x224 input: 53 convolutions.
const std::vector<Shape> kShapes = {
    {"conv1 7x7 3->64 s2 @224", 1, 3, 224, 64, 7, 2, false},
    {"l1 1x1 64->64 @56", 1, 64, 56, 64, 1, 1, true},
    {"l1 1x1 256->64 @56", 2, 256, 56, 64, 1, 1, true},
    {"l1 3x3 64->64 @56", 3, 64, 56, 64, 3, 1, true},
    {"l1 1x1 64->256 @56 (+ds)", 4, 64, 56, 256, 1, 1, true},
    {"l2 1x1 256->128 @56", 1, 256, 56, 128, 1, 1, true},
    {"l2 3x3 128->128 s2 @56", 1, 128, 56, 128, 3, 2, true},
    {"l2 ds 1x1 256->512 s2 @56", 1, 256, 56, 512, 1, 2, true},
    {"l2 1x1 512->128 @28", 3, 512, 28, 128, 1, 1, true},
    {"l2 3x3 128->128 @28", 3, 128, 28, 128, 3, 1, true},
    {"l2 1x1 128->512 @28", 4, 128, 28, 512, 1, 1, true},
    {"l3 1x1 512->256 @28", 1, 512, 28, 256, 1, 1, true},
    {"l3 3x3 256->256 s2 @28", 1, 256, 28, 256, 3, 2, true},
    {"l3 ds 1x1 512->1024 s2 @28", 1, 512, 28, 1024, 1, 2, true},
    {"l3 1x1 1024->256 @14", 5, 1024, 14, 256, 1, 1, true},
    {"l3 3x3 256->256 @14", 5, 256, 14, 256, 3, 1, true},
    {"l3 1x1 256->1024 @14", 6, 256, 14, 1024, 1, 1, true},
    {"l4 1x1 1024->512 @14", 1, 1024, 14, 512, 1, 1, true},
    {"l4 3x3 512->512 s2 @14", 1, 512, 14, 512, 3, 2, true},
    {"l4 ds 1x1 1024->2048 s2 @14", 1, 1024, 14, 2048, 1, 2, true},
    {"l4 1x1 2048->512 @7", 2, 2048, 7, 512, 1, 1, true},
    {"l4 3x3 512->512 @7", 2, 512, 7, 512, 3, 1, true},
    {"l4 1x1 512->2048 @7", 3, 512, 7, 2048, 1, 1, true},
};

struct Options {
  int batch = 8;
  int reps = 5;
  bool layers = false;
  bool edge = false;
  bool bf16_diff_weights = false;  // bf16 backward-weights writes bf16 diff_weights instead of f32
  bool wact_any = false;  // backward-weights picks its activation layouts (reorders from nhwc timed)
  bool dw_plain = false;  // backward-weights writes plain OIHW diff_weights (no blocked layout)
  bool winograd = false;  // stride-1 3x3 f32 layers by Winograd, activation reorders from nhwc timed
  std::vector<dt> dtypes = {dt::f32, dt::bf16};
};

// --clock cpu: time with the CPU clock (bench/common/bench_clock.hpp says when that helps).
bool g_cpu_clock = false;

double now_ms() { return kiln_bench::now_ms(g_cpu_clock); }

dnnl::memory filled(const dnnl::memory::desc& d, dt type, const dnnl::engine& eng, std::mt19937& rng) {
  dnnl::memory m(d, eng);
  // Small random bit patterns that are valid finite values in f32 and bf16 alike: the upper
  // 16 bits of floats in [-1, 1) (a bf16 pattern; as f32, the lower half is zero).
  auto* p = static_cast<std::uint16_t*>(m.get_data_handle());
  const std::size_t n16 = d.get_size() / 2;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t i = 0; i < n16; ++i) {
    float f = u(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    p[i] = (type == dt::f32 && i % 2 == 0) ? 0 : static_cast<std::uint16_t>(bits >> 16);
  }
  return m;
}

double median_ms(const dnnl::primitive& prim, dnnl::stream& s,
                 const std::unordered_map<int, dnnl::memory>& args, int reps) {
  prim.execute(s, args);  // warm-up (scratchpad, caches)
  s.wait();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_ms();
    prim.execute(s, args);
    s.wait();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// --act-any: every activation operand in the layout the primitive picks (oneDNN's blocked
// nChw8c/nChw16c), to see what channels-last costs on an ISA; no reorders are counted.
bool g_act_any = false;
// --winograd: the layer's algorithm (Winograd for stride-1 3x3 layers, which also take their
// activations in oneDNN's blocked layout, as Kiln's `conv3x3` option runs them).
dnnl::algorithm g_alg = dnnl::algorithm::convolution_direct;
dnnl::memory::desc nhwc(const dims& d, dt type) {
  return dnnl::memory::desc(d, type, g_act_any ? tag::any : tag::nhwc);
}
dnnl::memory::desc any(const dims& d, dt type) { return dnnl::memory::desc(d, type, tag::any); }

// The primitive descriptors, in the API of the oneDNN being compiled against.
#if DNNL_VERSION_MAJOR >= 3
dnnl::convolution_forward::primitive_desc fwd_pd(const dnnl::engine& e, const dims& src,
                                                 const dims& wei, const dims& dst, dt type,
                                                 const dims& st, const dims& pl, const dims& pr) {
  return dnnl::convolution_forward::primitive_desc(
      e, dnnl::prop_kind::forward_training, g_alg, nhwc(src, type),
      any(wei, type), nhwc(dst, type), st, dims{0, 0}, pl, pr);
}
dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
    const dnnl::engine& e, const dims& src, const dims& wei, const dims& dst, dt type, const dims& st,
    const dims& pl, const dims& pr, const dnnl::convolution_forward::primitive_desc& hint) {
  return dnnl::convolution_backward_data::primitive_desc(
      e, g_alg, nhwc(src, type), any(wei, type), nhwc(dst, type), st,
      dims{0, 0}, pl, pr, hint);
}
dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd(
    const dnnl::engine& e, const dnnl::memory::desc& src, const dnnl::memory::desc& dw,
    const dnnl::memory::desc& dst, const dims& st, const dims& pl, const dims& pr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return dnnl::convolution_backward_weights::primitive_desc(
      e, g_alg, src, dw, dst, st, dims{0, 0}, pl, pr, hint);
}
#else
dnnl::convolution_forward::primitive_desc fwd_pd(const dnnl::engine& e, const dims& src,
                                                 const dims& wei, const dims& dst, dt type,
                                                 const dims& st, const dims& pl, const dims& pr) {
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                          g_alg, nhwc(src, type),
                                          any(wei, type), nhwc(dst, type), st, dims{0, 0}, pl, pr);
  return dnnl::convolution_forward::primitive_desc(d, e);
}
dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
    const dnnl::engine& e, const dims& src, const dims& wei, const dims& dst, dt type, const dims& st,
    const dims& pl, const dims& pr, const dnnl::convolution_forward::primitive_desc& hint) {
  const dnnl::convolution_backward_data::desc d(g_alg,
                                                nhwc(src, type), any(wei, type), nhwc(dst, type),
                                                st, dims{0, 0}, pl, pr);
  return dnnl::convolution_backward_data::primitive_desc(d, e, hint);
}
dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd(
    const dnnl::engine& e, const dnnl::memory::desc& src, const dnnl::memory::desc& dw,
    const dnnl::memory::desc& dst, const dims& st, const dims& pl, const dims& pr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  const dnnl::convolution_backward_weights::desc d(g_alg, src, dw, dst,
                                                   st, dims{0, 0}, pl, pr);
  return dnnl::convolution_backward_weights::primitive_desc(d, e, hint);
}
#endif

const char* type_name(dt t) { return t == dt::bf16 ? "bf16" : "f32"; }

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "conv_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--batch") o.batch = std::stoi(value());
    else if (a == "--reps") o.reps = std::stoi(value());
    else if (a == "--layers") o.layers = true;
    else if (a == "--edge") o.edge = true;
    else if (a == "--bf16-diff-weights") o.bf16_diff_weights = true;
    else if (a == "--wact-any") o.wact_any = true;
    else if (a == "--act-any") g_act_any = true;
    else if (a == "--clock") {
      const std::string v = value();
      if (v != "wall" && v != "cpu") {
        std::fprintf(stderr, "conv_bench: --clock must be wall or cpu, not '%s'\n", v.c_str());
        std::exit(2);
      }
      g_cpu_clock = v == "cpu";
    }
    else if (a == "--dw-plain") o.dw_plain = true;
    else if (a == "--winograd") o.winograd = true;
    else if (a == "--dtype") {
      const std::string v = value();
      if (v == "f32") o.dtypes = {dt::f32};
      else if (v == "bf16") o.dtypes = {dt::bf16};
      else if (v == "both") o.dtypes = {dt::f32, dt::bf16};
      else {
        std::fprintf(stderr, "conv_bench: --dtype must be f32, bf16 or both, not '%s'\n", v.c_str());
        std::exit(2);
      }
    } else {
      std::fprintf(stderr,
                   "usage: conv_bench [--batch N] [--reps N] [--dtype f32|bf16|both] [--clock wall|cpu] [--layers] "
                   "[--edge] [--bf16-diff-weights] [--wact-any] [--act-any] [--dw-plain] [--winograd]\n");
      std::exit(2);
    }
  }
  if (o.batch < 1 || o.reps < 1) {
    std::fprintf(stderr, "conv_bench: --batch and --reps must be >= 1\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const dnnl_version_t* v = dnnl_version();
  std::printf("onednn %d.%d.%d (%s), %s clock\n", v->major, v->minor, v->patch, v->hash,
              g_cpu_clock ? "cpu" : "wall");
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  std::mt19937 rng(1);

  for (dt type : opt.dtypes) {
    const dt dw_type = (type == dt::bf16 && !opt.bf16_diff_weights) ? dt::f32 : type;
    double tot_fwd = 0, tot_bd = 0, tot_bw = 0, tot_edge = 0, tot_pull = 0, tot_act_edges = 0;
    // Kiln's input edge for the weights: the plain OIHW weights (the precision plugin's compute
    // copy, in the compute dtype) reordered into the primitive's blocked layout, every call.
    const auto pull = [&](const dims& wei, const dnnl::memory::desc& blocked) {
      if (!opt.edge) return 0.0;
      const dnnl::memory from = filled(dnnl::memory::desc(wei, type, tag::oihw), type, eng, rng), to(blocked, eng);
      return median_ms(dnnl::reorder(from, to), s, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, opt.reps);
    };
    std::map<std::string, int> impls;
    for (const Shape& sh : kShapes) {
      const std::int64_t n = opt.batch, p = sh.out();
      const dims src{n, sh.c, sh.h, sh.h}, wei{sh.k, sh.c, sh.r, sh.r}, dst{n, sh.k, p, p};
      const dims st{sh.stride, sh.stride}, pl{sh.pad(), sh.pad()};
      const std::int64_t far = std::max<std::int64_t>(0, (p - 1) * sh.stride + sh.r - sh.h - sh.pad());
      const dims pr{far, far};
      // Winograd: only f32 stride-1 3x3 layers (Kiln's rule, ops/conv2d.cpp, also asks for
      // whole channel blocks and outputs >= 14x14 or 7x7 with >= 256 channels: every such
      // layer of ResNet-50 qualifies). Its activations are blocked, so the six nhwc <-> blocked
      // reorders Kiln's edges do per step (x and dy in twice, y and dx out) are added.
      const bool wino = opt.winograd && type == dt::f32 && sh.r == 3 && sh.stride == 1;
      const bool act_any_before = g_act_any;
      g_alg = wino ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
      if (wino) g_act_any = true;

      const auto fpd = fwd_pd(eng, src, wei, dst, type, st, pl, pr);
      const dnnl::memory x = filled(fpd.src_desc(), type, eng, rng), w = filled(fpd.weights_desc(), type, eng, rng);
      const dnnl::memory y = filled(fpd.dst_desc(), type, eng, rng);
      double f = median_ms(dnnl::convolution_forward(fpd), s,
                                 {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}}, opt.reps);
      ++impls[std::string("fwd ") + fpd.impl_info_str()];
      double w_pull = pull(wei, fpd.weights_desc());

      double bd = 0;
      if (sh.bwd_data) {
        const auto dpd = bwd_data_pd(eng, src, wei, dst, type, st, pl, pr, fpd);
        const dnnl::memory dy = filled(dpd.diff_dst_desc(), type, eng, rng);
        const dnnl::memory wd = filled(dpd.weights_desc(), type, eng, rng);
        const dnnl::memory dx = filled(dpd.diff_src_desc(), type, eng, rng);
        bd = median_ms(dnnl::convolution_backward_data(dpd), s,
                       {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, wd}, {DNNL_ARG_DIFF_SRC, dx}}, opt.reps);
        ++impls[std::string("bwd_d ") + dpd.impl_info_str()];
        w_pull += pull(wei, dpd.weights_desc());
      }

      // Backward-weights: activations nhwc as Kiln passes them, or (--wact any) in the layout the
      // primitive picks, plus the reorders of x and dy into it that Kiln would then need.
      const auto act = [&](const dims& d) { return opt.wact_any ? any(d, type) : nhwc(d, type); };
      const dnnl::memory::desc dw_desc =
          opt.dw_plain ? dnnl::memory::desc(wei, dw_type, tag::oihw) : any(wei, dw_type);
      const auto wpd = bwd_weights_pd(eng, act(src), dw_desc, act(dst), st, pl, pr, fpd);
      const dnnl::memory xs = filled(wpd.src_desc(), type, eng, rng), dy = filled(wpd.diff_dst_desc(), type, eng, rng);
      const dnnl::memory dw = filled(wpd.diff_weights_desc(), dw_type, eng, rng);
      double bw = median_ms(dnnl::convolution_backward_weights(wpd), s,
                            {{DNNL_ARG_SRC, xs}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw}},
                            opt.reps);
      if (opt.wact_any) {
        for (const auto& [user, inner] : {std::pair{nhwc(src, type), wpd.src_desc()},
                                          std::pair{nhwc(dst, type), wpd.diff_dst_desc()}}) {
          if (user == inner) continue;
          const dnnl::memory from = filled(user, type, eng, rng), to(inner, eng);
          bw += median_ms(dnnl::reorder(from, to), s, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, opt.reps);
        }
      }
      ++impls[std::string("bwd_w ") + wpd.impl_info_str() + " dw " + type_name(dw_type)];

      double edge = 0;
      if (opt.edge) {
        // Kiln's Accumulate::yes output edge: blocked diff_weights += into the plain OIHW gradient.
        const dnnl::memory::desc plain(wei, dw_type, tag::oihw);
        dnnl::post_ops ops;
        ops.append_sum(1.0f);
        dnnl::primitive_attr attr;
        attr.set_post_ops(ops);
        const dnnl::reorder add(dnnl::reorder::primitive_desc(eng, wpd.diff_weights_desc(), eng, plain, attr));
        const dnnl::memory grad = filled(plain, dw_type, eng, rng);
        edge = median_ms(add, s, {{DNNL_ARG_FROM, dw}, {DNNL_ARG_TO, grad}}, opt.reps);
      }

      double act_edges = 0;
      if (wino) {
        g_act_any = act_any_before;
        const auto reorder_ms = [&](const dnnl::memory::desc& from_d, const dnnl::memory::desc& to_d) {
          const dnnl::memory from = filled(from_d, type, eng, rng), to(to_d, eng);
          return median_ms(dnnl::reorder(from, to), s, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, opt.reps);
        };
        const dnnl::memory::desc x_user(src, type, tag::nhwc), y_user(dst, type, tag::nhwc);
        const double x_in = reorder_ms(x_user, fpd.src_desc()), y_out = reorder_ms(fpd.dst_desc(), y_user);
        const double dy_in = reorder_ms(y_user, fpd.dst_desc()), dx_out = reorder_ms(fpd.src_desc(), x_user);
        f += x_in + y_out;     // forward: x in, y out
        bd += dy_in + dx_out;  // backward-data: dy in, dx out
        bw += x_in + dy_in;    // backward-weights: x and dy in
        act_edges = 2 * x_in + y_out + 2 * dy_in + dx_out;
      }
      tot_act_edges += act_edges * sh.count;
      tot_fwd += f * sh.count;
      tot_bd += bd * sh.count;
      tot_bw += bw * sh.count;
      tot_edge += edge * sh.count;
      tot_pull += w_pull * sh.count;
      if (opt.layers) {
        std::printf("layer %s %-30s x%d fwd %8.3f bwd_data %8.3f bwd_weights %8.3f edge %6.3f w_pull %6.3f ms\n",
                    type_name(type), sh.name, sh.count, f, bd, bw, edge, w_pull);
      }
    }
    std::printf("total %s fwd %.2f\n", type_name(type), tot_fwd);
    std::printf("total %s bwd_data %.2f\n", type_name(type), tot_bd);
    std::printf("total %s bwd_weights %.2f\n", type_name(type), tot_bw);
    if (opt.winograd) std::printf("total %s winograd_activation_reorders %.2f (in the totals above)\n", type_name(type), tot_act_edges);
    if (opt.edge) {
      std::printf("total %s dw_edge %.2f\n", type_name(type), tot_edge);
      std::printf("total %s w_pull %.2f\n", type_name(type), tot_pull);
    }
    for (const auto& [name, count] : impls) std::printf("impl %s %s x%d\n", type_name(type), name.c_str(), count);
  }
  return 0;
}
