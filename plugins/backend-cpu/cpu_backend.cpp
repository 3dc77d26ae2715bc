// CpuBackend construction, capability (op_table.hpp), memory and the (trivial) ordering calls.
// Memory is 64-byte aligned so oneDNN and AVX-512 loads see cache-line aligned rows; every
// MemoryKind gets the same plain host memory because the CPU has nothing to pin for.
#include "cpu_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cpu_info.hpp"
#include "host_memory.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"
#include "op_table.hpp"
#include "ops/conv_direct_avx2.hpp"
#include "ops/gemm_tn_avx2.hpp"
#include "ops/winograd3x3.hpp"
#include "parallel.hpp"

namespace kiln::cpu {
namespace {

/// Event of a backend whose ops finish before they return: always complete.
class CompleteEvent final : public Event {
 public:
  void synchronize() override {}
};

/// OMP_NUM_THREADS as a thread count: its first entry (the variable may list one count per
/// nesting level, "8,2"), if that is a positive whole number. Any other value is warned about, not
/// used (libgomp refuses it too) and taken out of the environment, before anything here calls
/// into OpenMP: LLVM's libomp, which a clang build links beside oneDNN's libgomp, reads the
/// variable at its first call, and for a value such as "many" it takes a thread count from
/// uninitialised memory (libomp 14 and 18: garbage from omp_get_max_threads(), "Out of heap
/// memory", a division by zero inside oneDNN). The backend is made before the process starts any
/// other thread (the communicator, the data workers), so nothing reads the environment meanwhile.
std::optional<int> omp_num_threads_env() {
  const char* value = std::getenv("OMP_NUM_THREADS");
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::string_view text(value);
  const std::string_view first = text.substr(0, text.find(','));
  int n = 0;
  const auto r = std::from_chars(first.data(), first.data() + first.size(), n);
  if (r.ec != std::errc() || r.ptr != first.data() + first.size() || n < 1) {
    kiln::log::get("cpu")->warn("OMP_NUM_THREADS='{}' is not a positive thread count; ignored (backend.threads = 0 "
                                "divides this process's CPUs among the local ranks instead)",
                                text);
    ::unsetenv("OMP_NUM_THREADS");  // `text` points into the entry: not used after this line
    return std::nullopt;
  }
  return n;
}

int choose_threads(const PluginArgs& args) {
  std::int64_t requested = 0;
  if (args.params != nullptr && args.params->contains("threads")) {
    requested = args.params->get_int("threads");
    if (requested < 0) {
      throw ConfigError(fmt::format("{} = {} is negative; use 0 for all cores divided among the "
                                    "local ranks, or a positive thread count",
                                    args.params->where("threads"), requested));
    }
  }
  if (requested > 0) return static_cast<int>(requested);
  // 0: OMP_NUM_THREADS where it is set, as PyTorch and HPC job scripts have it. A launcher that
  // binds each rank to its own CPUs (srun -c 8, mpirun --map-by ...:PE=8) gives it a CPU mask
  // that already is its share; dividing that again among the local ranks would idle most of it,
  // and such job scripts set OMP_NUM_THREADS to the share. Otherwise the CPUs this process may
  // use (its affinity mask) divided among the local ranks.
  if (const std::optional<int> from_env = omp_num_threads_env()) return *from_env;
  const int local = std::max(1, args.ranks.local_world_size);
  return std::max(1, omp_get_num_procs() / local);
}

/// Whether bf16 ops run on oneDNN's bf16 primitives: where oneDNN has them, unless `bf16_compute`
/// = "f32" asks for the widening path (storage only, f32 inside) that CPUs without them take.
bool use_bf16_primitives(const PluginArgs& args, const dnnl::engine& engine) {
  std::string mode = "auto";
  if (args.params != nullptr && args.params->contains("bf16_compute")) mode = args.params->get_string("bf16_compute");
  if (mode != "auto" && mode != "f32") {
    throw ConfigError(fmt::format("{} = \"{}\" is not a bf16 compute mode; use \"auto\" (oneDNN's bf16 "
                                  "kernels where the CPU has them) or \"f32\" (bf16 storage, f32 compute)",
                                  args.params->where("bf16_compute"), mode));
  }
  return mode == "auto" && onednn_has_bf16(engine);
}

/// A string option that picks one of `choices` (the first is the default, "auto"): the value, or
/// a ConfigError naming the key, the value and what it is not ("a convolution layout").
std::string choice(const PluginArgs& args, const char* key, std::initializer_list<std::string_view> choices,
                   std::string_view what) {
  std::string mode(*choices.begin());
  if (args.params != nullptr && args.params->contains(key)) mode = args.params->get_string(key);
  for (std::string_view c : choices) {
    if (mode == c) return mode;
  }
  std::string listed;
  std::size_t i = 0;
  for (std::string_view c : choices) {
    listed += fmt::format("{}\"{}\"", i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ", c);
    ++i;
  }
  throw ConfigError(fmt::format("{} = \"{}\" is not {}; use {}", args.params->where(key), mode, what, listed));
}

/// How 3x3 convolutions of plans that compute in f32 run (ops/conv2d.cpp says which shapes).
/// From AVX-512 up oneDNN's Winograd F(4x4, 3x3) kernels (on its blocked activation layout):
/// ResNet-50's 13 stride-1 3x3 layers, batch 8, 2 threads, took 207-236 ms per step in all three
/// directions against 369 direct (Zen 4; docs/benchmarks.md, "3x3 convolutions by Winograd").
/// oneDNN has no Winograd below AVX-512, and 3.2 none on AVX-512 either (asked, not assumed), so there (given AVX2, FMA and F16C)
/// "auto" and "winograd" run Kiln's own (ops/winograd3x3.hpp: on a Zen 4 with oneDNN 2.6, 221 ms
/// for those layers against oneDNN's Winograd 203 and its direct 325); "kiln_winograd" asks for Kiln's on any CPU that has AVX2, FMA and F16C,
/// AVX-512 ones included (to compare the two, and so that every CI machine tests it). The results
/// differ from the direct ones by f32 rounding of the transforms (tests/ops/test_conv3x3_winograd.cpp
/// bounds it). oneDNN's bf16 primitives have no Winograd, so bf16 plans are unchanged.
Conv3x3Mode conv3x3_mode(const PluginArgs& args, const dnnl::engine& engine) {
  const std::string mode =
      choice(args, "conv3x3", {"auto", "winograd", "kiln_winograd", "direct"}, "a 3x3 convolution algorithm");
  if (mode == "direct") return Conv3x3Mode::direct;
  const bool kiln_kernels = cpu_runs_kiln_winograd();
  if (mode == "kiln_winograd") {
    if (!kiln_kernels) {
      throw ConfigError(fmt::format("{} = \"kiln_winograd\": Kiln's Winograd convolutions need AVX2, FMA and F16C, "
                                    "which this CPU does not have; use \"auto\" or \"direct\"",
                                    args.params->where("conv3x3")));
    }
    return Conv3x3Mode::kiln_winograd;
  }
  if (onednn_has_f32_winograd(engine)) return Conv3x3Mode::onednn_winograd;  // planned once, at start
  if (kiln_kernels) return Conv3x3Mode::kiln_winograd;
  if (mode == "winograd") {
    throw ConfigError(fmt::format("{} = \"winograd\": Winograd convolutions need AVX2, FMA and F16C (Kiln's) or "
                                  "a oneDNN that has them (oneDNN's: 2.6 from AVX-512 up), and this CPU's oneDNN ISA is {}; "
                                  "use \"auto\" or \"direct\"",
                                  args.params->where("conv3x3"), isa_name(dnnl::get_effective_cpu_isa())));
  }
  return Conv3x3Mode::direct;
}

/// Whether convolutions compute on oneDNN's own (blocked) activation layout, reordering the
/// channels-last tensors at their edges. oneDNN 2.6's AVX2 convolutions are ~20% slower on nhwc
/// than on nChw8c (ResNet-50's 53 convolutions, all three directions, bench/onednn_versions
/// --act-any), more than the reorders cost (a ResNet-50 fp32 step 2688 -> 2338 ms on the Zen 3
/// EPYC); from AVX-512 up its nhwc kernels are as fast as the blocked ones, so no reorder pays.
/// Kiln's AVX2 Winograd (`conv3x3`) works on the channels-last tensors themselves, and with it
/// the blocked layout lost: its reorders now ran at every boundary between a Winograd layer and
/// a direct one (Zen 2 EPYC, ResNet-50 fp32 step 1376-1464 ms blocked, 1293-1374 channels-last;
/// fp16 and emulated bf16 plans, which keep the direct convolutions, were not slower either), so
/// "auto" picks blocked only on AVX2 CPUs whose 3x3 convolutions run direct.
bool use_blocked_conv_layout(const PluginArgs& args, Conv3x3Mode conv3x3) {
  const std::string mode = choice(args, "conv_layout", {"auto", "channels_last", "blocked"}, "a convolution layout");
  if (mode == "auto") {
    return dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core && conv3x3 != Conv3x3Mode::kiln_winograd;
  }
  return mode == "blocked";
}

/// Which conv plans run pointwise convolutions (1x1, stride 1, no padding) on channels-last
/// tensors as strided matmuls on the plain tensors (ops/conv1x1_matmul.hpp) instead of oneDNN's
/// convolution with its weight edges. "auto" does so where it was measured faster, with
/// channels-last convolutions (ResNet-50 training, batch 8, 2 threads): f32 plans on AVX-512 in
/// all three directions (the 32 layers' primitives plus edges 4-7% less time, 1.5-2.5% of a
/// step); f32 plans on AVX2 in backward-data only (Zen 2: oneDNN's AVX2 1x1 backward-data
/// convolutions ran at 138 GFLOP/s against its matmuls' ~180, while its 1x1 backward-weights
/// convolutions beat the transposed matmul by 10% and forward was even; steps 2% shorter).
/// bf16 plans keep the convolution: in training oneDNN 2.6's bf16 matmuls took 11-16% longer than
/// its bf16 1x1 convolutions, more than the edges save. f16 and widened bf16 plans were not
/// measured and keep it too. See docs/benchmarks.md, "1x1 convolutions as matmuls".
Conv1x1Mode conv1x1_mode(const PluginArgs& args, bool blocked_conv_layout) {
  const std::string mode = choice(args, "conv1x1", {"auto", "matmul", "conv"}, "a 1x1 convolution mode");
  if (mode == "auto") {
    if (blocked_conv_layout) return Conv1x1Mode::conv;
    return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? Conv1x1Mode::f32_matmul
                                                                       : Conv1x1Mode::f32_backward_data_matmul;
  }
  return mode == "matmul" ? Conv1x1Mode::matmul : Conv1x1Mode::conv;
}

/// Whether option `key` (auto|onednn|kiln_avx2) picks one of Kiln's AVX2 convolution kernels over
/// oneDNN's: "kiln_avx2" asks for it on any CPU that runs it (`cpu_runs`), AVX-512 ones included
/// (how those test it), and is a config error elsewhere; "auto" picks it on AVX2 CPUs (oneDNN's ISA
/// below AVX-512) with channels-last convolutions, the only ones it was measured on.
bool kiln_avx2_kernel_chosen(const PluginArgs& args, const char* key, const char* noun, const char* kernel,
                             const char* needs, bool cpu_runs, bool blocked_conv_layout) {
  const std::string mode = choice(args, key, {"auto", "onednn", "kiln_avx2"}, noun);
  if (mode == "kiln_avx2" && !cpu_runs) {
    throw ConfigError(fmt::format("{} = \"kiln_avx2\": {} needs {}, which this CPU does not have; use \"auto\" or "
                                  "\"onednn\"",
                                  args.params->where(key), kernel, needs));
  }
  return mode == "kiln_avx2" || (mode == "auto" && !blocked_conv_layout &&
                                 dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core && cpu_runs);
}

/// Whether convolutions' backward-filter runs Kiln's AVX2 kernel (ops/conv_filter_avx2.hpp) where
/// it fits and pays, in plans that compute in f32, instead of oneDNN's backward-weights primitive.
/// Its "auto" rule: oneDNN 2.6's AVX2 backward-weights kernels ran at 100-150 GFLOP/s against its
/// forward's ~200 (Zen 2; ResNet-50's 1x1 backward-filters 1.22-1.24x faster by Kiln's kernel,
/// fp32 steps 4% shorter; docs/benchmarks.md, "Convolution backward-filter by Kiln's AVX2 kernel").
ConvFilterMode conv_filter_mode(const PluginArgs& args, bool blocked_conv_layout) {
  return kiln_avx2_kernel_chosen(args, "conv_filter", "a convolution filter mode", "Kiln's AVX2 backward-filter",
                                 "AVX2, FMA and F16C", cpu_runs_gemm_tn_avx2(), blocked_conv_layout)
             ? ConvFilterMode::kiln_avx2
             : ConvFilterMode::onednn;
}

/// Whether convolutions that neither a 1x1 matmul nor Winograd takes run Kiln's AVX2 direct
/// convolution (ops/conv_direct_avx2.hpp) forward and backward-data, where it fits and pays, in
/// plans that compute in f32, instead of oneDNN's primitives. Its "auto" rule: oneDNN 2.6's AVX2
/// direct kernels ran ResNet-50's strided 3x3s and 7x7/512 3x3s at 95-140 GFLOP/s, and Kiln's took
/// 1.19-1.24x less time (Zen 2; docs/benchmarks.md, "Kiln's AVX2 direct convolution").
ConvDirectMode conv_direct_mode(const PluginArgs& args, bool blocked_conv_layout) {
  return kiln_avx2_kernel_chosen(args, "conv_direct", "a direct convolution mode", "Kiln's AVX2 direct convolution",
                                 "AVX2 and FMA", cpu_runs_conv_direct_avx2(), blocked_conv_layout)
             ? ConvDirectMode::kiln_avx2
             : ConvDirectMode::onednn;
}

}  // namespace

CpuBackend::CpuBackend(const PluginArgs& args)
    : threads_(choose_threads(args)),
      info_(describe_host_cpu(threads_)),
      engine_(dnnl::engine::kind::cpu, 0),
      bf16_primitives_(use_bf16_primitives(args, engine_)),
      conv3x3_(conv3x3_mode(args, engine_)),
      blocked_conv_layout_(use_blocked_conv_layout(args, conv3x3_)),
      conv1x1_(conv1x1_mode(args, blocked_conv_layout_)),
      conv_filter_(conv_filter_mode(args, blocked_conv_layout_)),
      conv_direct_(conv_direct_mode(args, blocked_conv_layout_)),
      stream_(engine_),
      matmuls_(std::make_unique<MatmulCache>(engine_, bf16_primitives_)),
      done_(std::make_shared<CompleteEvent>()) {
  omp_set_num_threads(threads_);
  if (blocked_conv_layout_) info_.detail += "; convolutions on oneDNN's blocked activation layout";
  if (conv1x1_ == Conv1x1Mode::matmul) info_.detail += "; 1x1 convolutions as matmuls";
  if (conv1x1_ == Conv1x1Mode::f32_matmul) info_.detail += "; 1x1 convolutions as matmuls in f32 plans";
  if (conv1x1_ == Conv1x1Mode::f32_backward_data_matmul) {
    info_.detail += "; 1x1 convolutions' backward-data as matmuls in f32 plans";
  }
  if (conv_filter_ == ConvFilterMode::kiln_avx2) {
    info_.detail += "; convolutions' backward-filter by Kiln's AVX2 kernel in plans computing in f32";
  }
  if (conv_direct_ == ConvDirectMode::kiln_avx2) {
    info_.detail +=
        "; strided and 7x7 3x3 convolutions' forward and backward-data by Kiln's AVX2 kernel in plans computing in f32";
  }
  if (conv3x3_ == Conv3x3Mode::onednn_winograd) info_.detail += "; 3x3 convolutions by Winograd in f32 plans";
  if (conv3x3_ == Conv3x3Mode::kiln_winograd) info_.detail += "; 3x3 convolutions by Kiln's Winograd in f32 plans";
  // Said in the run banner (the backend line), so a bf16 run here is never silently f32 inside.
  if (!bf16_primitives_) {
    info_.detail += onednn_has_bf16(engine_)
                        ? "; bf16: storage only, computed in f32 (backend.bf16_compute = \"f32\")"
                        : "; bf16: storage only, computed in f32 (no bf16 kernels in oneDNN on this CPU)";
  }
}

CpuBackend::~CpuBackend() = default;

void CpuBackend::use_our_threads() const {
  if (omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
}

Layout CpuBackend::activation_layout(DType) const {
  // oneDNN 2.6's convolutions are as fast on channels-last as on their own blocked layouts
  // (ResNet-50's layers, f32 and bf16), and its batch-norm is 3x faster on it than on NCHW.
  return Layout::nhwc;
}

bool CpuBackend::supports(Op op, DType dtype) const {
  // bf16 on a oneDNN row needs no bf16 primitives: without them it is widened to f32 at the
  // op's edges (compute_dtype, ops/dnnl_edge.hpp), as f16 always is.
  const CpuOp* row = sdk::op_row(kCpuOps, op);
  return row != nullptr && row->dtypes.has(dtype);
}

Tensor CpuBackend::allocate(const Shape& shape, DType dtype, MemoryKind where) {
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw BackendError(fmt::format("cpu backend, allocate: dimension {} of shape {} is "
                                     "negative; pass non-negative sizes",
                                     i, shape_string(shape)));
    }
  }
  const std::size_t bytes = shape_bytes(shape, dtype);  // checked: an overflow is a BackendError
  const auto refuse = [&](const std::optional<HostMemory>& available) {
    return BackendError(fmt::format(
        "cpu backend, allocate: a {} tensor of shape {} needs {} bytes, {} available{}; reduce the batch size or "
        "the model (the config value that sets this shape is too large for this machine)",
        dtype_name(dtype), shape_string(shape), bytes, available ? fmt::format("{}", available->bytes) : "?",
        available ? fmt::format(" ({})", available->source) : std::string(" (unknown)")));
  };
  // Checked before asking: with overcommit a huge malloc "succeeds" and the OOM killer ends the
  // process later, with no message at all.
  if (bytes >= kCheckedAllocationBytes) {
    const auto available = available_host_memory();
    if (available && bytes > available->bytes) throw refuse(available);
  }
  const std::size_t rounded = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
  void* p = bytes > SIZE_MAX - 63 ? nullptr : std::aligned_alloc(64, rounded);
  if (p == nullptr) throw refuse(available_host_memory());
  // Every kind is plain host memory; report it as host so nobody expects DMA-able pages.
  (void)where;
  auto storage = std::make_shared<Storage>(p, bytes, MemoryKind::host, [](void* q) { std::free(q); });
  return Tensor(std::move(storage), shape, dtype);
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  if (!src.defined() || !dst.defined() || src.memory() == MemoryKind::device ||
      dst.memory() == MemoryKind::device) {
    throw BackendError(fmt::format(
        "cpu backend, copy: src {} and dst {} must both be defined host tensors",
        src.defined() ? src.describe() : "undefined", dst.defined() ? dst.describe() : "undefined"));
  }
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel()) {
    throw BackendError(fmt::format("cpu backend, copy: src {} and dst {} must have the same dtype "
                                   "and element count; use cast to convert dtypes",
                                   src.describe(), dst.describe()));
  }
  if (src.data() == dst.data() || src.bytes() == 0) return;
  auto* d = static_cast<std::byte*>(dst.data());
  const auto* s = static_cast<const std::byte*>(src.data());
  const std::int64_t bytes = src.bytes();
  if (d < s + bytes && s < d + bytes) {  // overlapping views of one buffer: memmove's order matters
    std::memmove(d, s, bytes);
    return;
  }
  use_our_threads();
  parallel_slices(bytes, bytes >= kParallelMinBytes,
                  [&](std::int64_t begin, std::int64_t end) { std::memcpy(d + begin, s + begin, end - begin); });
}

namespace {
template <class T>
void fill_as(const Tensor& t, T value) {
  T* p = static_cast<T*>(t.data());
  parallel_slices(t.numel(), t.bytes() >= kParallelMinBytes,
                  [&](std::int64_t begin, std::int64_t end) { std::fill(p + begin, p + end, value); });
}
}  // namespace

void CpuBackend::fill(const Tensor& t, double value) {
  if (!t.defined() || t.memory() == MemoryKind::device) {
    throw BackendError(fmt::format("cpu backend, fill: {} must be a defined host tensor",
                                   t.defined() ? t.describe() : "undefined"));
  }
  use_our_threads();
  switch (t.dtype()) {
    case DType::f32: fill_as<float>(t, static_cast<float>(value)); break;
    case DType::f64: fill_as<double>(t, value); break;
    case DType::i32: fill_as<std::int32_t>(t, static_cast<std::int32_t>(value)); break;
    case DType::i64: fill_as<std::int64_t>(t, static_cast<std::int64_t>(value)); break;
    case DType::u8: fill_as<std::uint8_t>(t, static_cast<std::uint8_t>(value)); break;
    case DType::f16:
    case DType::bf16: {
      // Convert once through the cast op's rounding, then replicate the 16-bit pattern.
      Tensor one = allocate({1}, DType::f32, MemoryKind::host);
      *one.data_as<float>() = static_cast<float>(value);
      Tensor half = allocate({1}, t.dtype(), MemoryKind::host);
      cast(half, one);
      fill_as<std::uint16_t>(t, *static_cast<std::uint16_t*>(half.data()));
      break;
    }
  }
}

Tensor CpuBackend::to_device(const Tensor& host) {
  if (!host.defined() || host.memory() == MemoryKind::device) {
    throw BackendError(fmt::format("cpu backend, to_device: {} must be a defined host tensor",
                                   host.defined() ? host.describe() : "undefined"));
  }
  return host;  // host memory is this backend's device memory
}

std::shared_ptr<Event> CpuBackend::record_event(StreamKind) { return done_; }

}  // namespace kiln::cpu
