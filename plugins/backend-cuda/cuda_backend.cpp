// CudaBackend construction and teardown, the capability table, memory, copies, fill and stream
// ordering. The op bodies live in ops/*.cpp.
//
// Decisions: the device is chosen (device/device_select.cpp) before any other CUDA call; both
// streams are non-blocking (never serialised with the legacy default stream) and the
// communication stream gets the highest priority so NCCL's all-reduce kernels are scheduled
// promptly while backward fills the GPU. Copies into host memory synchronise the compute stream
// before returning (the contract); every other operation only enqueues.
#include "cuda_backend.hpp"

#include <cstring>

#include <fmt/format.h>

#include "cuda_check.hpp"
#include "device/cuda_event.hpp"
#include "device/device_select.hpp"
#include "dnn/dnn_policy.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"
#include "op_table.hpp"
#include "memory/device_allocator.hpp"
#include "memory/fill_kernel.hpp"
#include "nvml/nvml_sampler.hpp"

namespace kiln::cuda {
namespace {

/// [backend] parameters (validated against plugin.cpp's schema by the core).
struct CudaParams {
  int device = -1;
  bool allow_tf32 = false;
  bool cudnn_benchmark = false;
  bool conv_filter_reuse = true;
  bool nvml = true;
  ActivationLayoutChoice activation_layout = ActivationLayoutChoice::automatic;
  bool conv_transforms = true;
  std::int64_t conv_workspace_mib = kDefaultConvWorkspaceMib;
  std::size_t cache_limit_bytes = 0;
};

CudaParams read_params(const PluginArgs& args) {
  CudaParams p;
  const ParamMap* m = args.params;
  if (m == nullptr) return p;
  if (m->contains("device")) {
    const std::int64_t d = m->get_int("device");
    if (d < -1) {
      throw ConfigError(fmt::format("{} = {} is not a device; use -1 (the local rank's device) or a "
                                    "CUDA device ordinal >= 0",
                                    m->where("device"), d));
    }
    p.device = static_cast<int>(d);
  }
  if (m->contains("allow_tf32")) p.allow_tf32 = m->get_bool("allow_tf32");
  if (m->contains("cudnn_benchmark")) p.cudnn_benchmark = m->get_bool("cudnn_benchmark");
  if (m->contains("conv_filter_reuse")) p.conv_filter_reuse = m->get_bool("conv_filter_reuse");
  if (m->contains("nvml")) p.nvml = m->get_bool("nvml");
  if (m->contains("conv_transforms")) p.conv_transforms = m->get_bool("conv_transforms");
  if (m->contains("activation_layout")) {
    const std::string layout = m->get_string("activation_layout");
    if (layout == "nhwc") {
      p.activation_layout = ActivationLayoutChoice::nhwc;
    } else if (layout == "nchw") {
      p.activation_layout = ActivationLayoutChoice::nchw;
    } else if (layout != "auto") {  // the core checks the schema's choices first; this is the backstop
      throw ConfigError(fmt::format("{} = \"{}\" is not an activation layout; use \"auto\", \"nhwc\" or \"nchw\"",
                                    m->where("activation_layout"), layout));
    }
  }
  if (m->contains("conv_workspace_mib")) {
    const std::int64_t mib = m->get_int("conv_workspace_mib");
    if (mib < 0 || mib > kMaxConvWorkspaceMib) {  // the schema's bounds check first; this is the backstop
      throw ConfigError(fmt::format("{} = {} is not a workspace size; use 0 to {} MiB (0: only algorithms without "
                                    "workspace)",
                                    m->where("conv_workspace_mib"), mib, kMaxConvWorkspaceMib));
    }
    p.conv_workspace_mib = mib;
  }
  if (m->contains("cache_limit_mib")) {
    const std::int64_t mib = m->get_int("cache_limit_mib");
    if (mib < 0) {
      throw ConfigError(fmt::format("{} = {} is negative; use 0 for no limit or a size in MiB",
                                    m->where("cache_limit_mib"), mib));
    }
    p.cache_limit_bytes = static_cast<std::size_t>(mib) << 20;
  }
  return p;
}

/// cuBLAS workspace: NVIDIA recommends 32 MiB on Hopper, 4 MiB is enough before it.
std::size_t cublas_workspace_bytes(int cc) { return cc >= 90 ? std::size_t{32} << 20 : std::size_t{4} << 20; }

std::string describe_or_undefined(const Tensor& t) { return t.defined() ? t.describe() : "undefined"; }

/// The bit pattern of `value` as one element of `dtype` (the low dtype_size bytes).
std::uint64_t element_pattern(DType dtype, double value) {
  std::uint64_t bits = 0;
  auto store = [&bits](auto v) { std::memcpy(&bits, &v, sizeof(v)); };
  switch (dtype) {
    case DType::f32: store(static_cast<float>(value)); break;
    case DType::f64: store(value); break;
    case DType::f16: store(half_bits(static_cast<float>(value))); break;
    case DType::bf16: store(bfloat16_bits(static_cast<float>(value))); break;
    case DType::i32: store(static_cast<std::int32_t>(value)); break;
    case DType::i64: store(static_cast<std::int64_t>(value)); break;
    case DType::u8: store(static_cast<std::uint8_t>(value)); break;
  }
  return bits;
}

void fill_host(void* dst, std::size_t count, std::size_t element_bytes, std::uint64_t pattern) {
  auto* out = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(out + i * element_bytes, &pattern, element_bytes);
}

}  // namespace

CudaBackend::CudaBackend(const PluginArgs& args) {
  const CudaParams params = read_params(args);
  allow_tf32_ = params.allow_tf32;
  cudnn_benchmark_ = params.cudnn_benchmark;
  conv_filter_reuse_ = params.conv_filter_reuse;
  activation_layout_ = params.activation_layout;
  conv_transforms_ = params.conv_transforms;
  conv_workspace_mib_ = params.conv_workspace_mib;
  device_ = choose_device(params.device, args.ranks.local_rank);
  try {
    info_ = describe_device(device_);
    int major = 0;
    int minor = 0;
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_), "cudaDeviceGetAttribute");
    cc_ = major * 10 + minor;

    int lowest = 0;
    int highest = 0;  // numerically lowest = greatest priority
    check_cuda(cudaDeviceGetStreamPriorityRange(&lowest, &highest), "cudaDeviceGetStreamPriorityRange");
    check_cuda(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, lowest), "create the compute stream");
    check_cuda(cudaStreamCreateWithPriority(&comm_, cudaStreamNonBlocking, highest),
               "create the communication stream");

    allocator_ = std::make_unique<DeviceAllocator>(device_, compute_, params.cache_limit_bytes);

    check_cudnn(cudnnCreate(&cudnn_), "cudnnCreate");
    check_cudnn(cudnnSetStream(cudnn_, compute_), "cudnnSetStream");
    check_cublas(cublasCreate(&cublas_), "cublasCreate");
    check_cublas(cublasSetStream(cublas_, compute_), "cublasSetStream");
    check_cublas(cublasSetMathMode(cublas_, allow_tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                 "cublasSetMathMode");
    const std::size_t ws = cublas_workspace_bytes(cc_);
    cublas_workspace_ = workspace(ws);
    check_cublas(cublasSetWorkspace(cublas_, cublas_workspace_.data(), ws), "cublasSetWorkspace");
    check_cublas(cublasLtCreate(&cublaslt_), "cublasLtCreate");

    if (params.nvml) nvml_ = std::make_unique<NvmlSampler>(pci_bus_id(device_));
  } catch (...) {
    release_resources();
    throw;
  }
  const auto layout_name = [this](DType dtype) { return activation_layout(dtype) == Layout::nhwc ? "nhwc" : "nchw"; };
  log::get("cuda")->info("cuda:{} {} ({:.1f} GiB, {}); tf32 {}; convolution algorithms by {}{}{}; activations {} "
                         "in f32, {} in f16/bf16",
                         device_, info_.name, static_cast<double>(info_.total_memory) / (1024.0 * 1024.0 * 1024.0),
                         info_.detail, allow_tf32_ ? "allowed" : "off",
                         cudnn_benchmark_ ? "timing (cudnn_benchmark)" : "cuDNN's heuristics",
                         conv_transforms_ ? ", Winograd/FFT allowed in f32" : "",
                         conv_workspace_mib_ != kDefaultConvWorkspaceMib
                             ? fmt::format(", workspace up to {} MiB", conv_workspace_mib_)
                             : std::string(),
                         layout_name(DType::f32),
                         layout_name(DType::bf16));
}

CudaBackend::~CudaBackend() { release_resources(); }

void CudaBackend::release_resources() noexcept {
  if (compute_ != nullptr) cudaStreamSynchronize(compute_);
  if (comm_ != nullptr) cudaStreamSynchronize(comm_);
  cudaGetLastError();
  nvml_.reset();
  if (cublaslt_ != nullptr) cublasLtDestroy(cublaslt_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  cublaslt_ = nullptr;
  cublas_ = nullptr;
  cudnn_ = nullptr;
  cublas_workspace_ = Tensor();
  allocator_.reset();  // uses the compute stream, so before it goes
  if (comm_ != nullptr) cudaStreamDestroy(comm_);
  if (compute_ != nullptr) cudaStreamDestroy(compute_);
  comm_ = nullptr;
  compute_ = nullptr;
}

DeviceInfo CudaBackend::device() const { return info_; }

bool CudaBackend::supports(Op op, DType dtype) const { return cuda_supports(op, dtype); }

Layout CudaBackend::activation_layout(DType dtype) const {
  switch (activation_layout_) {
    case ActivationLayoutChoice::nhwc: return Layout::nhwc;
    case ActivationLayoutChoice::nchw: return Layout::row_major;
    case ActivationLayoutChoice::automatic: break;
  }
  // Tensor cores read convolutions channels-last natively (NCHW would add two transposes per
  // convolution); strict f32 has no tensor cores and measured faster NCHW (dnn_policy.hpp).
  return automatic_activation_layout(dtype, allow_tf32_);
}

std::map<std::string, double> CudaBackend::counters() const {
  std::map<std::string, double> out;
  if (nvml_) out = nvml_->sample();
  if (allocator_) {
    constexpr double kMiB = 1024.0 * 1024.0;
    const AllocatorStats s = allocator_->stats();
    out["allocator_allocated_mib"] = static_cast<double>(s.device.allocated) / kMiB;
    out["allocator_cached_mib"] = static_cast<double>(s.device.cached()) / kMiB;
    out["allocator_peak_mib"] = static_cast<double>(s.device.peak_allocated) / kMiB;
    out["allocator_cuda_mallocs"] = static_cast<double>(s.device.raw_allocs);
    out["workspace_largest_mib"] = static_cast<double>(largest_workspace_.load(std::memory_order_relaxed)) / kMiB;
  }
  out["cudnn_batchnorm_persistent_calls"] = static_cast<double>(bn_persistent_calls_.load(std::memory_order_relaxed));
  out["cudnn_batchnorm_spatial_calls"] = static_cast<double>(bn_spatial_calls_.load(std::memory_order_relaxed));
  out["conv_filter_copies_reused"] = static_cast<double>(conv_filter_reuses_.load(std::memory_order_relaxed));
  return out;
}

Tensor CudaBackend::allocate(const Shape& shape, DType dtype, MemoryKind where) {
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw BackendError(fmt::format("backend 'cuda', allocate: dimension {} of shape {} is negative; "
                                     "pass non-negative sizes",
                                     i, shape_string(shape)));
    }
  }
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  // Formatted only if the request fails (allocation_label.hpp): allocate is called per tensor.
  const AllocationLabel what = AllocationLabel::tensor("backend 'cuda', allocate", dtype, shape);
  switch (where) {
    case MemoryKind::host: return host_tensor(shape, dtype);
    case MemoryKind::host_pinned: return Tensor(allocator_->pinned(bytes, what), shape, dtype);
    case MemoryKind::device: break;
  }
  return Tensor(allocator_->device(bytes, compute_, what), shape, dtype);
}

Tensor CudaBackend::workspace(std::size_t bytes) {
  // The largest one so far, for counters(): the one temporary within a step that may be large
  // (a convolution's, capped at 1 GiB), which no between-op memory reading sees.
  std::size_t largest = largest_workspace_.load(std::memory_order_relaxed);
  while (bytes > largest && !largest_workspace_.compare_exchange_weak(largest, bytes, std::memory_order_relaxed)) {
  }
  const AllocationLabel what = AllocationLabel::bytes("backend 'cuda', workspace", bytes);
  return Tensor(allocator_->device(bytes, compute_, what), {static_cast<std::int64_t>(bytes)}, DType::u8);
}

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  if (!src.defined() || !dst.defined()) {
    throw BackendError(fmt::format("backend 'cuda', copy: src {} and dst {} must both be defined",
                                   describe_or_undefined(src), describe_or_undefined(dst)));
  }
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel()) {
    throw BackendError(fmt::format("backend 'cuda', copy: src {} and dst {} must have the same dtype and "
                                   "element count; use cast to convert dtypes",
                                   src.describe(), dst.describe()));
  }
  if (src.layout() != dst.layout() && src.rank() == 4) {
    throw BackendError(fmt::format("backend 'cuda', copy: src {} and dst {} differ in layout (a byte copy "
                                   "would scramble them); tag both the same with Tensor::with_layout",
                                   src.describe(), dst.describe()));
  }
  make_current(device_);  // copies into host memory may come from DataLoader threads
  // The messages are formatted only on failure: copy runs for every batch and every to_host.
  if (src.bytes() > 0 && src.data() != dst.data()) {
    const cudaError_t e = cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDefault, compute_);
    if (e != cudaSuccess) {
      check_cuda(e, fmt::format("backend 'cuda', copy {} -> {}: cudaMemcpyAsync", src.describe(), dst.describe()));
    }
  }
  if (dst.memory() != MemoryKind::device) {
    const cudaError_t e = cudaStreamSynchronize(compute_);
    if (e != cudaSuccess) {
      check_cuda(e, fmt::format("backend 'cuda', copy {} -> host: cudaStreamSynchronize", src.describe()));
    }
  }
}

void CudaBackend::fill(const Tensor& t, double value) {
  if (!t.defined()) throw BackendError("backend 'cuda', fill: the tensor is undefined");
  const std::uint64_t pattern = element_pattern(t.dtype(), value);
  const auto count = static_cast<std::size_t>(t.numel());
  const std::size_t element = dtype_size(t.dtype());
  if (t.memory() == MemoryKind::device) {
    fill_pattern(t.data(), count, static_cast<unsigned>(element), pattern, compute_);
    return;
  }
  // Host memory: earlier work on the compute stream may still read it (a pinned upload).
  check_cuda(cudaStreamSynchronize(compute_), "backend 'cuda', fill of host memory: cudaStreamSynchronize");
  fill_host(t.data(), count, element, pattern);
}

Tensor CudaBackend::to_device(const Tensor& host) {
  if (!host.defined()) throw BackendError("backend 'cuda', to_device: the tensor is undefined");
  if (host.memory() == MemoryKind::device) return host;
  if (host.layout() == Layout::opaque) {
    throw BackendError(fmt::format("backend 'cuda', to_device: {} has an opaque (another backend's) layout",
                                   host.describe()));
  }
  const AllocationLabel what = AllocationLabel::tensor("backend 'cuda', to_device", host.dtype(), host.shape());
  Tensor device(allocator_->device(host.bytes(), compute_, what), host.shape(), host.dtype(), 0, host.layout());
  copy(host, device);
  return device;
}

void CudaBackend::synchronize() {
  check_cuda(cudaStreamSynchronize(compute_), "backend 'cuda', synchronize: compute stream");
  check_cuda(cudaStreamSynchronize(comm_), "backend 'cuda', synchronize: communication stream");
}

std::shared_ptr<Event> CudaBackend::record_event(StreamKind stream) {
  return std::make_shared<CudaEvent>(stream == StreamKind::compute ? compute_ : comm_, device_);
}

void CudaBackend::wait_event(StreamKind stream, const Event& event) {
  const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
  if (cuda_event == nullptr) {
    throw BackendError("backend 'cuda', wait_event: the event was not recorded by a cuda backend; "
                       "record it with this backend's record_event()");
  }
  check_cuda(cudaStreamWaitEvent(stream == StreamKind::compute ? compute_ : comm_, cuda_event->native(), 0),
             "backend 'cuda', wait_event: cudaStreamWaitEvent");
}

void* CudaBackend::native_stream(StreamKind stream) {
  return stream == StreamKind::compute ? compute_ : comm_;
}

}  // namespace kiln::cuda
