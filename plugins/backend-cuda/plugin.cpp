// The library descriptor of libkiln-backend-cuda.so: one plugin, `cuda`, and its parameter schema.
// The core validates [backend] against kCudaParams before CudaBackend sees it; constructing the
// backend on a machine without a usable GPU fails with a BackendError that says so.
#include <kiln/sdk/plugin.hpp>

#include "cuda_backend.hpp"

namespace {

constexpr kiln_param_spec_v1 kCudaParams[] = {
    {"device", KILN_PARAM_INT, "-1", nullptr,
     "CUDA device ordinal; -1 = the local rank (one GPU per process, the usual launch)."},
    {"allow_tf32", KILN_PARAM_BOOL, "false", nullptr,
     "Let f32 GEMMs and convolutions use TF32 tensor-core math (faster, ~1e-3 relative error)."},
    {"nvml", KILN_PARAM_BOOL, "true", nullptr,
     "Sample GPU utilisation and memory through NVML (dlopen'ed) into metrics.jsonl."},
    {"cache_limit_mib", KILN_PARAM_INT, "0", nullptr,
     "Device memory the caching allocator may reserve before giving cached blocks back; 0 = no limit."},
    {"cudnn_benchmark", KILN_PARAM_BOOL, "false", nullptr,
     "Choose each convolution's algorithms by timing them (cudnnFind*, once per shape, cached) instead of "
     "cuDNN's heuristics; like torch.backends.cudnn.benchmark. Costs time at the first step."},
    {"conv_filter_reuse", KILN_PARAM_BOOL, "true", nullptr,
     "Let a channels-last convolution's backward-data call read the KRSC filter copy its forward made instead "
     "of laying the OIHW weights out again (one filter copy per layer and batch size; false = convert each call)."},
    {"activation_layout", KILN_PARAM_STRING, "\"auto\"", "auto|nhwc|nchw",
     "Layout of image activations: auto = channels-last (nhwc) where tensor cores run the convolutions (f16, bf16, "
     "f32 with allow_tf32) and NCHW for strict f32; nhwc = channels-last for every precision (like PyTorch's "
     "channels_last); nchw = NCHW for every precision."},
    {"conv_transforms", KILN_PARAM_BOOL, "true", nullptr,
     "Let f32 convolutions (TF32 off) use cuDNN's Winograd and FFT algorithms, as PyTorch does: faster 3x3 layers, "
     "f32 rounding of the transforms on top (the cpu backend's Winograd makes the same trade); false = direct and "
     "GEMM algorithms only."},
    {"conv_workspace_mib", KILN_PARAM_INT, "1024", nullptr,
     "The most device memory one convolution algorithm may use as workspace, in MiB; faster algorithms that need "
     "more are skipped (the debug log names them). 0 = only algorithms without workspace.", "0", "1048576"},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Backend, kiln::cuda::CudaBackend>(
    "cuda", "0.1.0",
    "CUDA compute backend: cuDNN convolution/batch-norm/pooling, cuBLAS(Lt) GEMM, own kernels; caching allocator, NVML counters.",
    kCudaParams));
