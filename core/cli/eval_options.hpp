// The options `kiln eval` and `kiln predict` share: which run, which checkpoint, whose weights
// (--ema), overrides, plugin directories. One definition, so the two commands read a run the same way.
#pragma once

#include <boost/program_options/options_description.hpp>

#include <string>
#include <vector>

#include "kiln/train/eval_session.hpp"

namespace kiln::cli {

/// Where the shared options land while parsing; request() turns them into an EvalRequest.
struct EvalOptions {
  std::string run_dir, checkpoint;
  std::vector<std::string> sets, plugin_paths;
  bool ema = false;

  void add_to(boost::program_options::options_description& opts);
  train::EvalRequest request() const;
};

}  // namespace kiln::cli
