// Error mapping of cuda_check.hpp and the host-side f16/bf16 conversions of the fill kernel.
// These call CUDA, cuDNN and cuBLAS only for names and strings (and cudaMemGetInfo, which fails
// harmlessly without a device), so they run in CI on a machine without a GPU.
#define BOOST_TEST_MODULE cuda_check
#include <boost/test/unit_test.hpp>

#include <string>

#include <kiln/errors.hpp>

#include "cuda_check.hpp"
#include "memory/fill_kernel.hpp"
#include "memory/oom_message.hpp"

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const kiln::BackendError& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(success_statuses_do_not_throw) {
  BOOST_CHECK_NO_THROW(kiln::cuda::check_cuda(cudaSuccess, "x"));
  BOOST_CHECK_NO_THROW(kiln::cuda::check_cudnn(CUDNN_STATUS_SUCCESS, "x"));
  BOOST_CHECK_NO_THROW(kiln::cuda::check_cublas(CUBLAS_STATUS_SUCCESS, "x"));
}

BOOST_AUTO_TEST_CASE(cuda_errors_carry_the_name_and_the_string) {
  const std::string msg = message_of(
      [] { kiln::cuda::check_cuda(cudaErrorInvalidValue, "conv2d_forward f16(8, 3, 224, 224): cudaMemcpyAsync"); });
  BOOST_TEST(msg == "conv2d_forward f16(8, 3, 224, 224): cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument");
  const std::string launch = message_of([] { kiln::cuda::check_cuda(cudaErrorLaunchFailure, "relu (kernel launch)"); });
  BOOST_TEST(contains(launch, "relu (kernel launch): cudaErrorLaunchFailure: "), launch);
}

BOOST_AUTO_TEST_CASE(a_cuda_out_of_memory_status_gets_the_batch_hint) {
  const std::string msg = message_of([] { kiln::cuda::check_cuda(cudaErrorMemoryAllocation, "cudnn workspace"); });
  BOOST_TEST(contains(msg, "cudnn workspace: cudaErrorMemoryAllocation: out of memory ("), msg);
  BOOST_TEST(contains(msg, "MiB free of "), msg);
  BOOST_TEST(contains(msg, "use a smaller per-rank batch (data.batch_size) or a lower precision"), msg);
}

BOOST_AUTO_TEST_CASE(cudnn_errors_carry_the_status_name) {
  const std::string msg = message_of([] { kiln::cuda::check_cudnn(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensor4dDescriptor"); });
  BOOST_TEST(contains(msg, "cudnnSetTensor4dDescriptor: cuDNN CUDNN_STATUS_BAD_PARAM (status 2000): "), msg);
}

BOOST_AUTO_TEST_CASE(a_real_cudnn_failure_includes_cudnns_own_detail) {
  // Descriptors are host objects: a negative dimension fails without a GPU.
  cudnnTensorDescriptor_t desc = nullptr;
  const cudnnStatus_t created = cudnnCreateTensorDescriptor(&desc);
  if (created != CUDNN_STATUS_SUCCESS) {
    BOOST_TEST_MESSAGE("cudnnCreateTensorDescriptor failed here: " << cudnnGetErrorString(created));
    return;
  }
  const cudnnStatus_t s = cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, -1, 3, 4, 4);
  const std::string msg = message_of([&] { kiln::cuda::check_cudnn(s, "plan_conv2d f32 x(-1, 3, 4, 4)"); });
  cudnnDestroyTensorDescriptor(desc);
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(contains(msg, "plan_conv2d f32 x(-1, 3, 4, 4): cuDNN CUDNN_STATUS_BAD_PARAM"), msg);
}

BOOST_AUTO_TEST_CASE(cublas_errors_carry_the_name_and_the_string) {
  const std::string msg = message_of([] { kiln::cuda::check_cublas(CUBLAS_STATUS_NOT_INITIALIZED, "matmul f16 (64, 64, 64)"); });
  BOOST_TEST(msg == "matmul f16 (64, 64, 64): cuBLAS CUBLAS_STATUS_NOT_INITIALIZED: the library was not initialized");
}

BOOST_AUTO_TEST_CASE(throw_out_of_memory_names_the_request_and_the_device) {
  const std::string msg = message_of([] { kiln::cuda::throw_out_of_memory("allocate f16(256, 64, 56, 56)", 3 << 20, 0); });
  BOOST_TEST(contains(msg, "allocate f16(256, 64, 56, 56): out of GPU memory asking for 3.0 MiB on device 0 ("), msg);
  BOOST_TEST(contains(msg, "; use a smaller per-rank batch (data.batch_size) or a lower precision"), msg);
}

BOOST_AUTO_TEST_CASE(the_out_of_memory_text_is_exact) {
  BOOST_TEST(kiln::cuda::format_out_of_memory("workspace", 1536u << 20, 3, 512u << 20, std::size_t{80} << 30) ==
             "workspace: out of GPU memory asking for 1536.0 MiB on device 3 (512.0 MiB free of 81920.0 MiB); use "
             "a smaller per-rank batch (data.batch_size) or a lower precision");
}

BOOST_AUTO_TEST_CASE(fill_patterns_round_to_nearest_even) {
  using kiln::cuda::bfloat16_bits;
  using kiln::cuda::half_bits;
  BOOST_TEST(half_bits(1.0f) == 0x3C00u);
  BOOST_TEST(half_bits(-2.0f) == 0xC000u);
  BOOST_TEST(half_bits(65504.0f) == 0x7BFFu);
  BOOST_TEST(half_bits(1e6f) == 0x7C00u);  // overflow: +inf
  BOOST_TEST(half_bits(0.0f) == 0x0000u);
  BOOST_TEST(bfloat16_bits(1.0f) == 0x3F80u);
  BOOST_TEST(bfloat16_bits(-0.5f) == 0xBF00u);
  BOOST_TEST(bfloat16_bits(1.00390625f) == 0x3F80u);  // 1 + 2^-8: a tie, rounds to even (down)
  BOOST_TEST(bfloat16_bits(1.01171875f) == 0x3F82u);  // 1 + 3 * 2^-8: a tie, rounds to even (up)
}
