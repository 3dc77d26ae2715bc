// The plain-C++ part of the cuda backend's dnn ops (plugins/backend-cuda/dnn/algo_key.*): keys
// that tell convolution and GEMM problems apart, the algorithm cache's select-once behaviour,
// math-mode choice and operand alignment. Runs in CI without a GPU.
#define BOOST_TEST_MODULE cuda_dnn_algo_key
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <functional>
#include <set>
#include <stdexcept>
#include <vector>

#include "dnn/algo_key.hpp"

using namespace kiln;
using namespace kiln::cuda;

namespace {

Conv2dDesc resnet_conv() {
  Conv2dDesc d;
  d.n = 256;
  d.c = 64;
  d.h = 56;
  d.w = 56;
  d.k = 64;
  d.r = 3;
  d.s = 3;
  d.pad_h = d.pad_w = 1;
  d.dtype = DType::f16;
  return d;
}

ConvAlgoKey base_key() {
  return conv_algo_key(resnet_conv(), ConvDirection::forward, 0, Layout::nhwc, MathMode::tensor_op);
}

/// One variant of the base key per field, each differing from the base in exactly that field.
std::vector<ConvAlgoKey> one_field_variants() {
  std::vector<ConvAlgoKey> v;
  const std::vector<std::function<void(ConvAlgoKey&)>> edits = {
      [](ConvAlgoKey& k) { k.device = 1; },
      [](ConvAlgoKey& k) { k.direction = ConvDirection::backward_data; },
      [](ConvAlgoKey& k) { k.direction = ConvDirection::backward_filter; },
      [](ConvAlgoKey& k) { k.n = 128; },
      [](ConvAlgoKey& k) { k.c = 128; },
      [](ConvAlgoKey& k) { k.h = 28; },
      [](ConvAlgoKey& k) { k.w = 28; },
      [](ConvAlgoKey& k) { k.k = 256; },
      [](ConvAlgoKey& k) { k.r = 1; },
      [](ConvAlgoKey& k) { k.s = 1; },
      [](ConvAlgoKey& k) { k.stride_h = 2; },
      [](ConvAlgoKey& k) { k.stride_w = 2; },
      [](ConvAlgoKey& k) { k.pad_h = 0; },
      [](ConvAlgoKey& k) { k.pad_w = 0; },
      [](ConvAlgoKey& k) { k.dilation_h = 2; },
      [](ConvAlgoKey& k) { k.dilation_w = 2; },
      [](ConvAlgoKey& k) { k.groups = 2; },
      [](ConvAlgoKey& k) { k.dtype = DType::bf16; },
      [](ConvAlgoKey& k) { k.layout = Layout::row_major; },
      [](ConvAlgoKey& k) { k.math = MathMode::fp32; },
      [](ConvAlgoKey& k) { k.search = AlgoSearch::exhaustive; },
      [](ConvAlgoKey& k) { k.workspace_mib = 4096; },
  };
  for (const auto& edit : edits) {
    ConvAlgoKey k = base_key();
    edit(k);
    v.push_back(k);
  }
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv_key_copies_every_descriptor_field) {
  Conv2dDesc d = resnet_conv();
  d.stride_h = 2;
  d.stride_w = 3;
  d.pad_h = 4;
  d.pad_w = 5;
  d.dilation_h = 6;
  d.dilation_w = 7;
  d.groups = 8;
  const ConvAlgoKey k = conv_algo_key(d, ConvDirection::backward_filter, 3, Layout::row_major,
                                      MathMode::tf32, AlgoSearch::exhaustive, 4096);
  BOOST_TEST(k.device == 3);
  BOOST_TEST((k.direction == ConvDirection::backward_filter));
  BOOST_TEST(k.n == 256);
  BOOST_TEST(k.c == 64);
  BOOST_TEST(k.h == 56);
  BOOST_TEST(k.w == 56);
  BOOST_TEST(k.k == 64);
  BOOST_TEST(k.r == 3);
  BOOST_TEST(k.s == 3);
  BOOST_TEST(k.stride_h == 2);
  BOOST_TEST(k.stride_w == 3);
  BOOST_TEST(k.pad_h == 4);
  BOOST_TEST(k.pad_w == 5);
  BOOST_TEST(k.dilation_h == 6);
  BOOST_TEST(k.dilation_w == 7);
  BOOST_TEST(k.groups == 8);
  BOOST_TEST((k.dtype == DType::f16));
  BOOST_TEST((k.layout == Layout::row_major));
  BOOST_TEST((k.math == MathMode::tf32));
  BOOST_TEST((k.search == AlgoSearch::exhaustive));
  BOOST_TEST(k.workspace_mib == 4096);
  BOOST_TEST(base_key().workspace_mib == kDefaultConvWorkspaceMib);
}

BOOST_AUTO_TEST_CASE(equal_problems_give_equal_keys_and_hashes) {
  const ConvAlgoKey a = base_key(), b = base_key();
  BOOST_TEST((a == b));
  BOOST_TEST(ConvAlgoKeyHash{}(a) == ConvAlgoKeyHash{}(b));
}

BOOST_AUTO_TEST_CASE(every_field_changes_the_key_and_its_hash) {
  const ConvAlgoKey base = base_key();
  std::set<std::size_t> hashes{ConvAlgoKeyHash{}(base)};
  const auto variants = one_field_variants();
  for (std::size_t i = 0; i < variants.size(); ++i) {
    BOOST_TEST(!(variants[i] == base), "variant " << i << ": " << variants[i].describe());
    hashes.insert(ConvAlgoKeyHash{}(variants[i]));
  }
  BOOST_TEST(hashes.size() == variants.size() + 1);
}

BOOST_AUTO_TEST_CASE(conv_key_describes_the_problem) {
  BOOST_TEST(base_key().describe() ==
             "forward f16 nhwc tensor_op x(256, 64, 56, 56) k=64 3x3 stride 1x1 pad 1x1 dilation "
             "1x1 groups 1 on device 0 (heuristic, workspace <= 1024 MiB)");
  ConvAlgoKey k = base_key();
  k.direction = ConvDirection::backward_filter;
  k.layout = Layout::row_major;
  k.dtype = DType::f32;
  k.math = MathMode::tf32;
  k.search = AlgoSearch::exhaustive;
  k.workspace_mib = 4096;
  BOOST_TEST(k.describe() ==
             "backward-filter f32 nchw tf32 x(256, 64, 56, 56) k=64 3x3 stride 1x1 pad 1x1 "
             "dilation 1x1 groups 1 on device 0 (exhaustive, workspace <= 4096 MiB)");
}

BOOST_AUTO_TEST_CASE(cache_selects_once_per_key) {
  AlgoCache cache;
  int calls = 0;
  const auto select = [&] {
    ++calls;
    return AlgoChoice{calls, 1, 4096u * static_cast<std::size_t>(calls)};
  };
  const AlgoChoice first = cache.get_or_select(base_key(), select);
  const AlgoChoice again = cache.get_or_select(base_key(), select);
  BOOST_TEST(calls == 1);
  BOOST_TEST((first == again));
  BOOST_TEST(first.algo == 1);
  BOOST_TEST(first.workspace_bytes == 4096u);
  BOOST_TEST(cache.hits() == 1u);
  BOOST_TEST(cache.misses() == 1u);

  for (const ConvAlgoKey& k : one_field_variants()) cache.get_or_select(k, select);
  BOOST_TEST(cache.size() == one_field_variants().size() + 1);
  BOOST_TEST(calls == static_cast<int>(one_field_variants().size()) + 1);
  const auto found = cache.find(one_field_variants().back());
  BOOST_TEST_REQUIRE(found.has_value());
  BOOST_TEST(found->algo == calls);

  cache.clear();
  BOOST_TEST(cache.size() == 0u);
  BOOST_TEST(!cache.find(base_key()).has_value());
  BOOST_TEST(cache.hits() == 0u);
}

BOOST_AUTO_TEST_CASE(a_failed_selection_is_not_cached) {
  AlgoCache cache;
  int calls = 0;
  const auto failing = [&]() -> AlgoChoice {
    ++calls;
    throw std::runtime_error("no algorithm");
  };
  BOOST_CHECK_THROW(cache.get_or_select(base_key(), failing), std::runtime_error);
  BOOST_TEST(cache.size() == 0u);
  const AlgoChoice c = cache.get_or_select(base_key(), [&] {
    ++calls;
    return AlgoChoice{7, 2, 0};
  });
  BOOST_TEST(calls == 2);
  BOOST_TEST(c.algo == 7);
  BOOST_TEST(c.math_type == 2);
}

BOOST_AUTO_TEST_CASE(process_wide_cache_is_one_object) {
  BOOST_TEST(&conv_algo_cache() == &conv_algo_cache());
}

BOOST_AUTO_TEST_CASE(math_mode_follows_dtype_and_tf32_option) {
  BOOST_TEST((math_mode_for(DType::f16, false) == MathMode::tensor_op));
  BOOST_TEST((math_mode_for(DType::bf16, true) == MathMode::tensor_op));
  BOOST_TEST((math_mode_for(DType::f32, false) == MathMode::fp32));
  BOOST_TEST((math_mode_for(DType::f32, true) == MathMode::tf32));
  // conv_transforms: f32 without TF32 only; TF32 (which allows transforms anyway) wins.
  BOOST_TEST((math_mode_for(DType::f32, false, true) == MathMode::fp32_transforms));
  BOOST_TEST((math_mode_for(DType::f32, true, true) == MathMode::tf32));
  BOOST_TEST((math_mode_for(DType::bf16, false, true) == MathMode::tensor_op));
  BOOST_TEST(fma_math(MathMode::fp32));
  BOOST_TEST(fma_math(MathMode::fp32_transforms));
  BOOST_TEST(!fma_math(MathMode::tf32));
  BOOST_TEST(!fma_math(MathMode::tensor_op));
  BOOST_TEST(math_mode_name(MathMode::tf32) == "tf32");
  BOOST_TEST(math_mode_name(MathMode::fp32_transforms) == "fp32_transforms");
  BOOST_TEST(conv_direction_name(ConvDirection::backward_data) == "backward-data");
}

BOOST_AUTO_TEST_CASE(alignment_is_the_largest_common_power_of_two_up_to_16) {
  const auto p = [](std::uintptr_t a) { return reinterpret_cast<const void*>(a); };
  BOOST_TEST(common_alignment({p(0x1000)}) == 16u);
  BOOST_TEST(common_alignment({p(0x1000), p(0x2008)}) == 8u);
  BOOST_TEST(common_alignment({p(0x1004), p(0x2000)}) == 4u);
  BOOST_TEST(common_alignment({p(0x1002), p(0x2000), nullptr}) == 2u);
  BOOST_TEST(common_alignment({p(0x1001)}) == 1u);
  BOOST_TEST(common_alignment({nullptr}) == 16u);
}

BOOST_AUTO_TEST_CASE(gemm_keys_differ_in_every_field) {
  GemmKey base;
  base.m = 64;
  base.n = 10;
  base.k = 128;
  const std::vector<std::function<void(GemmKey&)>> edits = {
      [](GemmKey& k) { k.device = 1; },
      [](GemmKey& k) { k.m = 65; },
      [](GemmKey& k) { k.n = 11; },
      [](GemmKey& k) { k.k = 129; },
      [](GemmKey& k) { k.ta = Transpose::yes; },
      [](GemmKey& k) { k.tb = Transpose::yes; },
      [](GemmKey& k) { k.ab = DType::bf16; },
      [](GemmKey& k) { k.c = DType::bf16; },
      [](GemmKey& k) { k.bias_dtype = DType::bf16; },
      [](GemmKey& k) { k.bias = GemmBias::epilogue; },
      [](GemmKey& k) { k.math = MathMode::tf32; },
      [](GemmKey& k) { k.alignment = 4; },
  };
  std::set<std::size_t> hashes{GemmKeyHash{}(base)};
  for (const auto& edit : edits) {
    GemmKey k = base;
    edit(k);
    BOOST_TEST(!(k == base), k.describe());
    hashes.insert(GemmKeyHash{}(k));
  }
  BOOST_TEST(hashes.size() == edits.size() + 1);
  GemmKey same = base;
  BOOST_TEST((same == base));
  BOOST_TEST(GemmKeyHash{}(same) == GemmKeyHash{}(base));
}

BOOST_AUTO_TEST_CASE(gemm_key_describes_the_problem) {
  GemmKey k;
  k.m = 64;
  k.n = 10;
  k.k = 128;
  k.tb = Transpose::yes;
  k.ab = DType::bf16;
  k.c = DType::f32;
  k.bias = GemmBias::epilogue;
  k.bias_dtype = DType::f32;
  k.math = MathMode::tensor_op;
  k.alignment = 8;
  BOOST_TEST(k.describe() ==
             "c f32(64, 10) = op(a) bf16(64, 128) x op(b) (128, 10)^T + bias f32 tensor_op align 8 "
             "on device 0");
}

BOOST_AUTO_TEST_CASE(store_replaces_a_choice_refused_at_run_time) {
  AlgoCache cache;
  const AlgoChoice chosen = cache.get_or_select(base_key(), [] { return AlgoChoice{6, 1, 0}; });
  BOOST_TEST(chosen.algo == 6);
  cache.store(base_key(), AlgoChoice{1, 1, 4096});  // algo 6 was refused; 1 worked
  const AlgoChoice later = cache.get_or_select(base_key(), []() -> AlgoChoice { throw std::runtime_error("no"); });
  BOOST_TEST(later.algo == 1);
  BOOST_TEST(later.workspace_bytes == 4096u);
  BOOST_TEST(cache.size() == 1u);
  cache.store(one_field_variants().front(), AlgoChoice{0, 0, 0});  // store also inserts
  BOOST_TEST(cache.size() == 2u);
}
