// The plain-C++ decisions of the cuda backend's cuDNN ops (plugins/backend-cuda/dnn/dnn_policy.*):
// cuDNN 9 status categories, the batch-norm start mode and fallback, the fp32 convolution
// algorithm exclusions and the order of fallback candidates. Runs in CI without a GPU (cudnn.h's
// enums and macros only; nothing calls cuDNN).
#include <boost/test/unit_test.hpp>

#include <vector>

#include "dnn/dnn_policy.hpp"

using namespace kiln;
using namespace kiln::cuda;

BOOST_AUTO_TEST_SUITE(dnn_policy)

BOOST_AUTO_TEST_CASE(not_supported_is_a_category_in_cudnn_9) {
  BOOST_TEST(cudnn_not_supported(CUDNN_STATUS_NOT_SUPPORTED));
  for (int code = 3001; code <= 3014; ++code) {  // NOT_SUPPORTED_GRAPH_PATTERN .. _INVALID_DYNAMIC_SHAPE
    BOOST_TEST(cudnn_not_supported(static_cast<cudnnStatus_t>(code)), "code " << code);
  }
  BOOST_TEST(cudnn_not_supported(CUDNN_STATUS_NOT_SUPPORTED_SHAPE));
  BOOST_TEST(cudnn_not_supported(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT));
  BOOST_TEST(!cudnn_not_supported(CUDNN_STATUS_SUCCESS));
  BOOST_TEST(!cudnn_not_supported(CUDNN_STATUS_BAD_PARAM));
  BOOST_TEST(!cudnn_not_supported(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH));
  BOOST_TEST(!cudnn_not_supported(CUDNN_STATUS_INTERNAL_ERROR));
  BOOST_TEST(!cudnn_not_supported(CUDNN_STATUS_EXECUTION_FAILED));
}

BOOST_AUTO_TEST_CASE(auto_layout_is_channels_last_wherever_tensor_cores_run_the_convolutions) {
  BOOST_TEST((automatic_activation_layout(DType::f16, false) == Layout::nhwc));
  BOOST_TEST((automatic_activation_layout(DType::bf16, false) == Layout::nhwc));
  BOOST_TEST((automatic_activation_layout(DType::f32, true) == Layout::nhwc));  // TF32: tensor cores
  BOOST_TEST((automatic_activation_layout(DType::f32, false) == Layout::row_major));
  // allow_tf32 changes only f32 (f16/bf16 always run on tensor cores).
  BOOST_TEST((automatic_activation_layout(DType::bf16, true) == Layout::nhwc));
}

BOOST_AUTO_TEST_CASE(batchnorm_starts_persistent_for_nhwc_of_every_dtype) {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    BOOST_TEST(batchnorm_start_mode(d, Layout::nhwc) == CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
    BOOST_TEST(batchnorm_start_mode(d, Layout::row_major) == CUDNN_BATCHNORM_SPATIAL);
  }
}

BOOST_AUTO_TEST_CASE(batchnorm_falls_back_on_any_not_supported_sub_code) {
  const auto P = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  BOOST_TEST(batchnorm_falls_back(CUDNN_STATUS_NOT_SUPPORTED, P));
  BOOST_TEST(batchnorm_falls_back(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, P));
  BOOST_TEST(batchnorm_falls_back(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, P));
  BOOST_TEST(batchnorm_falls_back(static_cast<cudnnStatus_t>(3014), P));
  BOOST_TEST(!batchnorm_falls_back(CUDNN_STATUS_SUCCESS, P));
  BOOST_TEST(!batchnorm_falls_back(CUDNN_STATUS_BAD_PARAM, P));
  BOOST_TEST(!batchnorm_falls_back(CUDNN_STATUS_EXECUTION_FAILED, P));
  // Already spatial: nothing to fall back to, the status is the error.
  BOOST_TEST(!batchnorm_falls_back(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, CUDNN_BATCHNORM_SPATIAL));
}

BOOST_AUTO_TEST_CASE(fp32_plans_never_use_fft_or_winograd_unless_transforms_are_allowed) {
  const auto fwd = ConvDirection::forward, bwd_data = ConvDirection::backward_data,
             bwd_filter = ConvDirection::backward_filter;
  for (int a : {CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED}) {
    BOOST_TEST(!conv_algo_allowed(fwd, a, MathMode::fp32), "fwd algo " << a);
    BOOST_TEST(conv_algo_allowed(fwd, a, MathMode::tf32), "fwd algo " << a);
    BOOST_TEST(conv_algo_allowed(fwd, a, MathMode::tensor_op), "fwd algo " << a);
    BOOST_TEST(conv_algo_allowed(fwd, a, MathMode::fp32_transforms), "fwd algo " << a);
  }
  for (int a : {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT}) {
    BOOST_TEST(conv_algo_allowed(fwd, a, MathMode::fp32), "fwd algo " << a);
  }
  for (int a : {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED}) {
    BOOST_TEST(!conv_algo_allowed(bwd_data, a, MathMode::fp32), "bwd data algo " << a);
    BOOST_TEST(conv_algo_allowed(bwd_data, a, MathMode::fp32_transforms), "bwd data algo " << a);
  }
  BOOST_TEST(conv_algo_allowed(bwd_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, MathMode::fp32));
  BOOST_TEST(conv_algo_allowed(bwd_data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, MathMode::fp32));
  for (int a : {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED}) {
    BOOST_TEST(!conv_algo_allowed(bwd_filter, a, MathMode::fp32), "bwd filter algo " << a);
    BOOST_TEST(conv_algo_allowed(bwd_filter, a, MathMode::fp32_transforms), "bwd filter algo " << a);
  }
  for (int a : {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3}) {
    BOOST_TEST(conv_algo_allowed(bwd_filter, a, MathMode::fp32), "bwd filter algo " << a);
  }
}

BOOST_AUTO_TEST_CASE(run_time_refusals_are_retried_other_failures_are_not) {
  BOOST_TEST(conv_retry_on(CUDNN_STATUS_NOT_SUPPORTED));
  BOOST_TEST(conv_retry_on(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT));
  BOOST_TEST(conv_retry_on(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM));
  BOOST_TEST(conv_retry_on(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED));
  BOOST_TEST(conv_retry_on(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED));
  BOOST_TEST(!conv_retry_on(CUDNN_STATUS_BAD_PARAM));
  BOOST_TEST(!conv_retry_on(CUDNN_STATUS_BAD_PARAM_NULL_POINTER));
  BOOST_TEST(!conv_retry_on(CUDNN_STATUS_EXECUTION_FAILED));
  BOOST_TEST(!conv_retry_on(CUDNN_STATUS_EXECUTION_FAILED_CUDART));
  BOOST_TEST(!conv_retry_on(CUDNN_STATUS_NOT_INITIALIZED));
}

BOOST_AUTO_TEST_CASE(fallback_candidates_follow_heuristic_order_skipping_failures) {
  const std::vector<AlgoChoice> ranked{{6, 1, 0}, {1, 1, 4096}, {0, 1, 0}};
  BOOST_TEST(next_conv_candidate(ranked, {})->algo == 6);
  BOOST_TEST(next_conv_candidate(ranked, {6})->algo == 1);
  BOOST_TEST(next_conv_candidate(ranked, {6})->workspace_bytes == 4096u);
  BOOST_TEST(next_conv_candidate(ranked, {1, 6})->algo == 0);
  BOOST_TEST(next_conv_candidate(ranked, {0})->algo == 6);
  BOOST_TEST(!next_conv_candidate(ranked, {0, 1, 6}).has_value());
  BOOST_TEST(!next_conv_candidate({}, {}).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
