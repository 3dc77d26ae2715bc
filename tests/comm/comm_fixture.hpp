// Helpers of test_comm: the in-tree plugins loaded through the core registry (as a run does),
// a cpu backend for connect(), one thread per rank, and exact element conversions.
//
// Rank threads never touch Boost.Test (it is not thread-safe): they return what they saw, and
// the main thread asserts. The cpu backend is used only from the main thread (casts that
// prepare inputs and widen results), as the Backend contract asks.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/plugin/registry.hpp"
#include "../support/error_text.hpp"

namespace kiln::test {

/// The registry over KILN_TEST_PLUGIN_DIR, scanned once per process.
const plugin::Registry& registry();
/// The process-wide cpu backend (threads = 1), made by the plugin's factory.
Backend& cpu();

/// Makes one communicator of plugin `name` with the [comm] table `toml_body` (e.g.
/// "algorithm = \"ring\"\ninterface = \"lo\""), validated against the plugin's schema.
std::shared_ptr<Communicator> make_communicator(const std::string& name, const std::string& toml_body,
                                                const RankInfo& ranks);

/// Runs body(rank) on one thread per rank and waits for all; returns each rank's exception
/// message ("" when it returned normally).
std::vector<std::string> run_ranks(int world, const std::function<void(int rank)>& body);

/// Host tensor of `dtype` with values[i] (f32/f64/f16/bf16 via the backend's rounding cast;
/// integer dtypes by static_cast).
Tensor make_tensor(const std::vector<double>& values, DType dtype);
/// The elements of a tensor of any dtype as doubles (exact widening).
std::vector<double> read_values(const Tensor& t);
/// The value `x` rounded to `dtype` exactly as make_tensor stores it.
double round_to(double x, DType dtype);

/// Rank `r` of `world` on one host (local rank = rank), as the tests' threads or processes are.
RankInfo rank_of(int r, int world);

}  // namespace kiln::test
