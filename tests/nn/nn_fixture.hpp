// Shared helpers of the nn, train and golden tests: the real `cpu` backend and `mlp` model made
// through the core plugin registry (as a run makes them), and host <-> device copies in double.
//
// The registry is process-wide and never destroyed, so plugin objects never outlive their code.
// Plugin parameters are validated from inline TOML through kiln::config::Config, so a test sees
// exactly the defaults a user would.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin/registry.hpp"
#include "../support/error_text.hpp"

namespace kiln::test {

/// The process-wide plugin registry over the build tree's plugins (never destroyed).
const plugin::Registry& registry();

/// The process-wide cpu backend (defaults: threads = 0).
Backend& cpu();

/// Validates `toml_body` (the keys of one plugin table, without `type`) against the schema of
/// plugin `name` of `kind` and returns the ParamMap its factory would get.
ParamMap plugin_params(std::uint32_t kind, const std::string& name, const std::string& toml_body);

/// A new `mlp` model with the [model] keys in `toml_body` (not yet built).
std::shared_ptr<Model> make_mlp(const std::string& toml_body);

/// Device (or host) f32/f16/bf16 tensor -> doubles (16-bit types through an exact cast).
std::vector<double> read(const Tensor& t);
/// Doubles -> an existing f32 tensor (device or host).
void write(const Tensor& t, const std::vector<double>& v);
/// A device f32 tensor of `shape` holding `v`.
/// A cpu tensor holding v (given in logical order) in `layout`.
Tensor device_f32(const Shape& shape, const std::vector<double>& v, kiln::Layout layout = kiln::Layout::row_major);
/// `n` uniform values in [lo, hi).
std::vector<double> uniform(std::size_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0);

}  // namespace kiln::test
