// Helpers of the test_train executable: validated core tables from inline TOML, and a small
// ParameterStore-backed pair of parameters on the real cpu backend for optimizer tests.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"
#include "../nn/nn_fixture.hpp"

namespace kiln::test {

/// Validates `body` as table `table` ("optimizer", "schedule") against `schema`; the source
/// name in messages is "test.toml" and `body` starts on line 2.
inline ParamMap core_table(const std::string& table, const std::string& body,
                           std::span<const kiln_param_spec_v1> schema) {
  auto cfg = config::Config::parse("[" + table + "]\n" + body + "\n", "test.toml", {});
  return cfg.validate(table, schema);
}

}  // namespace kiln::test
