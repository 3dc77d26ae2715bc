// What `kiln plugins test FILE` checks of a model or data plugin, beyond loading: the contract
// of kiln/model.hpp and kiln/data_source.hpp exercised on the cpu backend, one line per check.
//
// Model (built for a batch of 4, run on batches of 3 so a partial batch is exercised):
//   parameters   non-empty, unique names, each gradient shaped like its value
//   forward      train-mode logits (3, num_classes), finite; eval mode gives the same bits twice
//   backward     every parameter reported exactly once, gradients finite and not all zero
//   accumulate   a second forward and backward on the same batch doubles every gradient (+=)
//   gradient     d(sum(logits * R))/dw by backward against central differences (three step
//                sizes, the closest kept), at the largest-gradient entries of up to 4 parameters
//   frozen       fresh models built with ModelBuildContext::frozen naming all parameters but the
//                last, the first half, and every other one: each trainable parameter reported
//                once with the gradient the unfrozen model gives, kParamFrozen on exactly the
//                frozen ones or on none (a model may ignore `frozen`)
// Data (indices 0, the middle one and the last):
//   describe     count, shape, dtype and classes make sense
//   read         every byte of the slot written (two reads into buffers filled differently
//                agree), deterministic for a seed, labels in [0, classes), f32 values finite
//   threads      64 samples read by 4 threads at once equal the same samples read one by one
// Communicator (host memory; ranks are threads of this process over an in-memory store):
//   dtypes       which of f32, f64, bf16, f16 all_reduce takes: f32 must; another may be refused
//                with an error on every rank
//   connect, all_reduce, identical, broadcast, all_gather, barrier, in_flight
//                the suite of comm_suite.hpp in worlds 1, 2, 3 and 4, every element exact; a world
//                size refused at connect by every rank is noted (`local` runs one rank)
//   missing_rank connect with rank 1 absent ends in a CommError after the 2 s timeout
//   silent_peer  an all_reduce rank 1 never calls ends in a CommError after the 2 s timeout
//   abort        abort() from another thread releases an all_reduce waiting for a peer
// A probe or suite case still running 10 s past the 20 s timeout fails as `dtypes` or `suite`
// (a deadlock), and the process must then end: see CommCheckReport::hung. The three figures
// scale together with `kiln plugins test --timeout S` (CommCheckTimes).
// Precision policy (conformance_precision.hpp; four f32 parameters of odd sizes, three in one
// arena and one in a storage of its own; every check after `backend` on a fresh policy):
//   dtypes       param_dtype() f32, compute_dtype() f32, bf16 or f16
//   backend      check_backend(cpu) accepts it, or refuses it with an UnsupportedError (the rest
//                is then not run); loss_scale() finite and > 0
//   cast         before_forward writes every compute copy as its master rounded to nearest, ties
//                to even (ties, subnormals, past f16's range), and refreshes them after the
//                masters change, which it leaves as they were
//   unscale      gradients of g * loss_scale() give apply and g (within 1e-6) after after_allreduce
//   overflow     +inf, NaN or -inf in one element of one parameter: skip or a NumericError; a
//                policy whose loss_scale() is 1 may apply it (kiln/precision_policy.hpp)
//   scale        (loss_scale() != 1) an overflow lowers the scale or, fixed, is a NumericError;
//                clean steps never lower it, and may raise it (up to 5000 are run)
//   state        state() after an overflow and clean steps, loaded into a fresh policy, gives the
//                same state() and loss_scale(), also a step later; state and metrics finite
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/data_source.hpp"
#include "kiln/model.hpp"

namespace kiln::cli {

struct CheckLine {
  bool ok = false;
  std::string name;    ///< "backward"
  std::string detail;  ///< what was found; on a failure, what is wrong
  bool skipped = false;  ///< not run (`detail` says why); counts as passed
};

/// What a check returns: passed, and what it found or what is wrong.
using Verdict = std::pair<bool, std::string>;

/// Runs one check; whatever it throws fails it, with the message (plugin code may throw
/// anything, and one failed check must not hide the report).
template <class Check>
CheckLine run_check(const char* name, Check&& check) {
  CheckLine line{false, name, ""};
  try {
    const Verdict v = check();
    line.ok = v.first;
    line.detail = v.second;
  } catch (const std::exception& e) {
    line.detail = std::string("threw: ") + e.what();
  } catch (...) {
    line.detail = "threw something that is not a std::exception";
  }
  return line;
}

/// Runs the model checks with `backend` on a model from `make_model` (created, not built); the
/// `frozen` check asks it for three more.
std::vector<CheckLine> check_model(const std::function<std::shared_ptr<Model>()>& make_model, Backend& backend);

/// Runs the data checks on `source`.
std::vector<CheckLine> check_data(const DataSource& source);

/// Makes rank `ranks.rank`'s communicator (created, not connected).
using CommMaker = std::function<std::shared_ptr<Communicator>(const RankInfo& ranks)>;

struct CommCheckReport {
  std::vector<CheckLine> lines;
  /// A call stayed blocked inside the plugin even after abort(); its thread is detached, so the
  /// process must end (std::_Exit) without unloading the plugin under it.
  bool hung = false;
  /// What the checks keep alive until the report goes (a connected world of one rank, see
  /// conformance_comm.cpp); after `hung`, until the process ends.
  std::shared_ptr<const void> keep_alive;
};

/// The communicator checks' timeouts, from one figure (`kiln plugins test --timeout S`): the
/// suite's and the dtypes probe's communicators get `suite`; the failure checks (a rank that never
/// comes, one that goes quiet) a tenth of it, short enough to wait out; a call still running half
/// of `suite` past what its check allows counts as blocked. A transport slower to connect than the
/// default allows wants more; a test of a plugin that blocks on purpose, less.
struct CommCheckTimes {
  std::chrono::milliseconds suite{20000};
  std::chrono::milliseconds short_timeout() const { return suite / 10; }
  std::chrono::milliseconds grace() const { return suite / 2; }
};

/// Runs the communicator checks on communicators from `make`, connected with `backend`.
CommCheckReport check_communicator(const CommMaker& make, Backend& backend, const CommCheckTimes& times = {});

}  // namespace kiln::cli
