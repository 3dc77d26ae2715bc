// ConvPlan (conv_plan.hpp): descriptor setup and algorithm selection (heuristics, or cudnnFind timing) for cuDNN's legacy
// convolution API (still present in cuDNN 9).
#include "dnn/conv_plan.hpp"

#include <vector>

#include <fmt/format.h>

#include <kiln/sdk/log.hpp>

namespace kiln::cuda {
namespace {

cudnnMathType_t requested_math(MathMode m) {
  return fma_math(m) ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/// Whether a heuristic result's math type keeps the numerics the plan promises.
bool math_acceptable(cudnnMathType_t t, MathMode mode, DType dtype) {
  if (t == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return dtype == DType::f16;
  if (fma_math(mode)) return t == CUDNN_FMA_MATH || t == CUDNN_DEFAULT_MATH;
  return true;
}

/// The math type to run a chosen result with: strict FMA for f32 plans without TF32 whatever cuDNN
/// listed.
cudnnMathType_t run_math(cudnnMathType_t listed, MathMode mode) {
  return fma_math(mode) ? CUDNN_FMA_MATH : listed;
}

/// "algo 1 (tensor-op, 12 MiB, 0.530 ms)": one candidate for the debug line below; the time only
/// where cuDNN measured it (cudnn_benchmark).
template <class Perf>
std::string candidate_text(const Perf& r, cudnnMathType_t math, std::size_t bytes, bool timed) {
  const char* math_name = math == CUDNN_FMA_MATH                            ? "fma"
                          : math == CUDNN_DEFAULT_MATH                      ? "default"
                          : math == CUDNN_TENSOR_OP_MATH                    ? "tensor-op"
                                                                            : "tensor-op-conversion";
  return timed ? fmt::format("algo {} ({}, {} MiB, {:.3f} ms)", static_cast<int>(r.algo), math_name, bytes >> 20, r.time)
               : fmt::format("algo {} ({}, {} MiB)", static_cast<int>(r.algo), math_name, bytes >> 20);
}

/// Every usable heuristic result, in cuDNN's order (the first is the plan's choice, the rest are
/// the fallbacks when one is refused at run time). Logs the choice at debug level (the run's log
/// file always has it): which algorithm each shape runs, and with cudnn_benchmark what cuDNN
/// measured, is what tells a slow choice from a slow kernel (docs/gpu-check.md).
template <class Perf, class Workspace>
std::vector<AlgoChoice> pick(const DnnCheck& check, const ConvPlan& p, cudnnConvolutionDescriptor_t conv,
                             const std::vector<Perf>& perf, int returned, ConvDirection dir, Layout layout,
                             Workspace&& workspace_size) {
  std::string rejected;
  std::string listed;
  std::vector<AlgoChoice> usable;
  const bool timed = p.search == AlgoSearch::exhaustive;
  for (int i = 0; i < returned; ++i) {
    const Perf& r = perf[static_cast<std::size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS) continue;
    if (!math_acceptable(r.mathType, p.math, p.desc.dtype)) continue;
    if (!conv_algo_allowed(dir, static_cast<int>(r.algo), p.math)) continue;  // FFT/Winograd in fp32
    const cudnnMathType_t m = run_math(r.mathType, p.math);
    check.cudnn(cudnnSetConvolutionMathType(conv, m), [&] { return "cudnnSetConvolutionMathType"; });
    std::size_t bytes = 0;
    if (workspace_size(static_cast<int>(r.algo), &bytes) != CUDNN_STATUS_SUCCESS) continue;
    if (bytes > static_cast<std::size_t>(p.workspace_mib) << 20) {
      // With timing, the measured time says whether the limit cost speed (conv_workspace_mib).
      rejected += timed ? fmt::format(" algo {} needs {} MiB ({:.3f} ms);", static_cast<int>(r.algo), bytes >> 20, r.time)
                        : fmt::format(" algo {} needs {} MiB;", static_cast<int>(r.algo), bytes >> 20);
      continue;
    }
    if (usable.size() < 4) listed += (usable.empty() ? "" : ", ") + candidate_text(r, m, bytes, timed);
    usable.push_back(AlgoChoice{static_cast<int>(r.algo), static_cast<int>(m), bytes});
  }
  if (!usable.empty()) {
    log::get("cuda")->debug("conv algo: {} {} in {}, {} math, by {}: {}{}{}", conv_direction_name(dir), describe(p.desc),
                            layout_word(layout), math_mode_name(p.math), timed ? "timing" : "heuristics", listed,
                            usable.size() > 4 ? fmt::format(" (+{} more usable)", usable.size() - 4) : "",
                            rejected.empty() ? "" : fmt::format("; over the {} MiB workspace limit:{}", p.workspace_mib, rejected));
    return usable;
  }
  check.fail_library(fmt::format(
      "cuDNN offers no usable {} algorithm for {} in {} ({} math; {} candidates{}); try another "
      "dtype or layout",
      conv_direction_name(dir), describe(p.desc), layout_word(layout), math_mode_name(p.math),
      returned,
      rejected.empty() ? std::string()
                       : fmt::format(", over the {} MiB workspace limit ([backend] conv_workspace_mib):{}",
                                     p.workspace_mib, rejected)));
}

std::vector<AlgoChoice> select(const DnnCheck& check, cudnnHandle_t handle, const ConvPlan& p,
                               ConvPlan::Setup& s, Layout layout, ConvDirection dir) {
  const auto what = [&](const char* call) {
    return fmt::format("{} for {} in {}", call, describe(p.desc), layout_word(layout));
  };
  cudnnConvolutionDescriptor_t conv = s.conv.get();
  const bool timed = p.search == AlgoSearch::exhaustive;
  int max = 0, returned = 0;
  switch (dir) {
    case ConvDirection::forward: {
      check.cudnn(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max),
                  [&] { return what("cudnnGetConvolutionForwardAlgorithmMaxCount"); });
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(max));
      if (timed) {
        check.cudnn(cudnnFindConvolutionForwardAlgorithm(handle, s.x.get(), s.w.get(), conv, s.y.get(), max,
                                                         &returned, perf.data()),
                    [&] { return what("cudnnFindConvolutionForwardAlgorithm"); });
      } else {
        check.cudnn(cudnnGetConvolutionForwardAlgorithm_v7(handle, s.x.get(), s.w.get(), conv,
                                                           s.y.get(), max, &returned, perf.data()),
                    [&] { return what("cudnnGetConvolutionForwardAlgorithm_v7"); });
      }
      return pick(check, p, conv, perf, returned, dir, layout, [&](int algo, std::size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(handle, s.x.get(), s.w.get(), conv, s.y.get(),
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
      });
    }
    case ConvDirection::backward_data: {
      check.cudnn(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max),
                  [&] { return what("cudnnGetConvolutionBackwardDataAlgorithmMaxCount"); });
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<std::size_t>(max));
      if (timed) {
        check.cudnn(cudnnFindConvolutionBackwardDataAlgorithm(handle, s.w.get(), s.y.get(), conv, s.x.get(), max,
                                                              &returned, perf.data()),
                    [&] { return what("cudnnFindConvolutionBackwardDataAlgorithm"); });
      } else {
        check.cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, s.w.get(), s.y.get(), conv,
                                                                s.x.get(), max, &returned, perf.data()),
                    [&] { return what("cudnnGetConvolutionBackwardDataAlgorithm_v7"); });
      }
      return pick(check, p, conv, perf, returned, dir, layout, [&](int algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            handle, s.w.get(), s.y.get(), conv, s.x.get(),
            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
      });
    }
    case ConvDirection::backward_filter: {
      check.cudnn(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max),
                  [&] { return what("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount"); });
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<std::size_t>(max));
      if (timed) {
        check.cudnn(cudnnFindConvolutionBackwardFilterAlgorithm(handle, s.x.get(), s.y.get(), conv, s.w.get(), max,
                                                                &returned, perf.data()),
                    [&] { return what("cudnnFindConvolutionBackwardFilterAlgorithm"); });
      } else {
        check.cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, s.x.get(), s.y.get(), conv,
                                                                  s.w.get(), max, &returned, perf.data()),
                    [&] { return what("cudnnGetConvolutionBackwardFilterAlgorithm_v7"); });
      }
      return pick(check, p, conv, perf, returned, dir, layout, [&](int algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            handle, s.x.get(), s.y.get(), conv, s.w.get(),
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
      });
    }
  }
  check.fail_library("unknown convolution direction");
}

}  // namespace


ConvPlan::ConvPlan(const Conv2dDesc& d, int dev, MathMode m, AlgoSearch search_method, std::int64_t workspace)
    : desc(d), device(dev), math(m), search(search_method), workspace_mib(workspace),
      x_dims{d.n, d.c, d.h, d.w}, y_dims{d.n, d.k, d.out_h(), d.out_w()},
      w_dims{d.k, d.c / d.groups, d.r, d.s} {}

ConvPlan::Setup& ConvPlan::setup(const DnnCheck& check, Layout layout) {
  auto& slot = setups_[layout == Layout::nhwc ? 1 : 0];
  if (slot) return *slot;
  auto s = std::make_unique<Setup>();
  s->x.set(check, x_dims, desc.dtype, layout);
  s->y.set(check, y_dims, desc.dtype, layout);
  s->w.set(check, w_dims, desc.dtype, layout);
  const auto what = [&](const char* call) {
    return fmt::format("{} for {} in {}", call, describe(desc), layout_word(layout));
  };
  check.cudnn(cudnnSetConvolution2dDescriptor(
                  s->conv.get(), static_cast<int>(desc.pad_h), static_cast<int>(desc.pad_w),
                  static_cast<int>(desc.stride_h), static_cast<int>(desc.stride_w),
                  static_cast<int>(desc.dilation_h), static_cast<int>(desc.dilation_w),
                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              [&] { return what("cudnnSetConvolution2dDescriptor"); });
  check.cudnn(cudnnSetConvolutionGroupCount(s->conv.get(), static_cast<int>(desc.groups)),
              [&] { return what("cudnnSetConvolutionGroupCount"); });
  check.cudnn(cudnnSetConvolutionMathType(s->conv.get(), requested_math(math)),
              [&] { return what("cudnnSetConvolutionMathType"); });
  int n = 0, c = 0, h = 0, w = 0;
  check.cudnn(cudnnGetConvolution2dForwardOutputDim(s->conv.get(), s->x.get(), s->w.get(), &n, &c, &h, &w),
              [&] { return what("cudnnGetConvolution2dForwardOutputDim"); });
  if (n != y_dims.n || c != y_dims.c || h != y_dims.h || w != y_dims.w) {
    check.fail_library(fmt::format("cuDNN computes a ({}, {}, {}, {}) output for {} but "
                                   "Conv2dDesc gives ({}, {}, {}, {}); report this as a bug",
                                   n, c, h, w, describe(desc), y_dims.n, y_dims.c, y_dims.h,
                                   y_dims.w));
  }
  slot = std::move(s);
  return *slot;
}

AlgoChoice ConvPlan::algo(const DnnCheck& check, cudnnHandle_t handle, Setup& s, Layout layout,
                          ConvDirection direction) {
  auto& cached = s.algos[static_cast<std::size_t>(direction)];
  if (!cached) {
    const ConvAlgoKey key = conv_algo_key(desc, direction, device, layout, math, search, workspace_mib);
    cached = conv_algo_cache().get_or_select(
        key, [&] { return select(check, handle, *this, s, layout, direction).front(); });
  }
  check.cudnn(cudnnSetConvolutionMathType(s.conv.get(), static_cast<cudnnMathType_t>(cached->math_type)),
              [&] { return fmt::format("cudnnSetConvolutionMathType for {}", describe(desc)); });
  return *cached;
}

void ConvPlan::retry(const DnnCheck& check, cudnnHandle_t handle, Setup& s, Layout layout, ConvDirection direction,
                     const AlgoChoice& first, cudnnStatus_t status,
                     const std::function<cudnnStatus_t(const AlgoChoice&)>& call,
                     const std::function<std::string(const AlgoChoice&)>& describe_choice) {
  std::vector<int>& failed = s.failed[static_cast<std::size_t>(direction)];
  failed.push_back(first.algo);
  std::string attempts = fmt::format("algo {}: {} ({})", first.algo, cudnnGetErrorString(status), static_cast<int>(status));
  AlgoChoice last = first;
  const std::vector<AlgoChoice> ranked = select(check, handle, *this, s, layout, direction);
  while (const std::optional<AlgoChoice> next = next_conv_candidate(ranked, failed)) {
    check.cudnn(cudnnSetConvolutionMathType(s.conv.get(), static_cast<cudnnMathType_t>(next->math_type)),
                [&] { return fmt::format("cudnnSetConvolutionMathType for {}", describe(desc)); });
    last = *next;
    status = call(*next);
    if (status == CUDNN_STATUS_SUCCESS) {
      s.algos[static_cast<std::size_t>(direction)] = *next;
      conv_algo_cache().store(conv_algo_key(desc, direction, device, layout, math, search, workspace_mib), *next);
      log::get("cuda")->warn("{} for {} in {}: cuDNN refused the heuristic's algorithm at run time ({}); using algo {} "
                             "instead",
                             conv_direction_name(direction), describe(desc), layout_word(layout), attempts,
                             next->algo);
      return;
    }
    failed.push_back(next->algo);
    attempts += fmt::format("; algo {}: {} ({})", next->algo, cudnnGetErrorString(status), static_cast<int>(status));
    if (!conv_retry_on(status)) break;
  }
  check.cudnn(status, [&] {
    return fmt::format("{}; every usable algorithm failed, in heuristic order: {}", describe_choice(last), attempts);
  });
  check.fail_library(fmt::format("{}: no convolution algorithm ran ({})", describe(desc), attempts));
}

}  // namespace kiln::cuda
