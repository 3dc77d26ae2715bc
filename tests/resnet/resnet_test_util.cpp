// Helpers of the resnet tests (see resnet_test_util.hpp).
#include "resnet_test_util.hpp"

#include "kiln/plugin_abi.h"
#include "nn_fixture.hpp"

namespace kiln::test {

std::unique_ptr<resnet::ResnetModel> make_resnet(const std::string& toml_body) {
  const ParamMap params = plugin_params(KILN_KIND_MODEL, "resnet", toml_body);
  PluginArgs args;
  args.params = &params;
  return std::make_unique<resnet::ResnetModel>(args);
}

std::unique_ptr<synthetic::SyntheticSource> make_synthetic(const std::string& toml_body) {
  const ParamMap params = plugin_params(KILN_KIND_DATA, "synthetic", toml_body);
  PluginArgs args;
  args.params = &params;
  return std::make_unique<synthetic::SyntheticSource>(args);
}

void build(Model& model, std::int64_t max_batch) {
  ModelBuildContext ctx;
  ctx.backend = &cpu();
  ctx.max_batch = max_batch;
  ctx.seed = 7;
  model.build(ctx);
}

boost::test_tools::assertion_result cnn_ops_available(boost::unit_test::test_unit_id) {
  const Op ops[] = {Op::conv2d_forward,          Op::conv2d_backward_data,    Op::conv2d_backward_filter,
                    Op::batchnorm_train_forward, Op::batchnorm_infer_forward, Op::batchnorm_backward,
                    Op::pool2d_forward,          Op::pool2d_backward,         Op::global_avgpool_forward,
                    Op::global_avgpool_backward, Op::add_relu_forward,        Op::add};
  for (Op op : ops) {
    if (!cpu().supports(op, DType::f32)) {
      boost::test_tools::assertion_result r(false);
      r.message() << "the cpu backend does not implement " << op_name(op) << " for f32 yet";
      return r;
    }
  }
  return true;
}

NoConvBackend::NoConvBackend() : ForwardingBackend(cpu()) {}
bool NoConvBackend::supports(Op op, DType dtype) const {
  if (op == Op::conv2d_forward || op == Op::conv2d_backward_data || op == Op::conv2d_backward_filter) return false;
  return ForwardingBackend::supports(op, dtype);
}

}  // namespace kiln::test
