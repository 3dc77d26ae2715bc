// The plain-C++ decisions of the cuda backend's cuDNN ops (plugins/backend-cuda/dnn/dnn_policy.*):
// cuDNN 9 status categories, the batch-norm start mode and fallback. Runs in CI without a GPU (cudnn.h's
// enums and macros only; nothing calls cuDNN).
#include <boost/test/unit_test.hpp>

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

BOOST_AUTO_TEST_CASE(batchnorm_starts_persistent_only_where_it_is_trusted) {
  BOOST_TEST(batchnorm_start_mode(DType::f16, Layout::nhwc) == CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
  BOOST_TEST(batchnorm_start_mode(DType::bf16, Layout::nhwc) ==
             (kBf16PersistentBatchNormVerified ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL));
  BOOST_TEST(!kBf16PersistentBatchNormVerified);  // flip with a GPU run that shows it works
  BOOST_TEST(batchnorm_start_mode(DType::f32, Layout::nhwc) == CUDNN_BATCHNORM_SPATIAL);
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
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

BOOST_AUTO_TEST_SUITE_END()
