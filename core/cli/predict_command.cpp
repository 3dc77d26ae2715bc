// Options of `kiln predict`, and the per-batch step from logits to rows. The loader runs
// unshuffled with the "partial" last batch (EvalRequest::every_sample), so the running row
// count is the sample's index in the data source.
#include "predict_command.hpp"

#include <boost/program_options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eval_options.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/eval_session.hpp"
#include "prediction_file.hpp"

namespace kiln::cli {
namespace po = boost::program_options;

namespace {

constexpr std::int64_t kDefaultTopK = 5;

/// Softmax of one row of logits, in double so the probabilities sum to 1 to well within 1e-9.
std::vector<double> softmax(const float* logits, std::int64_t classes) {
  const float top = *std::max_element(logits, logits + classes);
  std::vector<double> p(static_cast<std::size_t>(classes));
  double sum = 0;
  for (std::int64_t c = 0; c < classes; ++c) sum += p[c] = std::exp(static_cast<double>(logits[c]) - top);
  for (double& v : p) v /= sum;
  return p;
}

}  // namespace

int run_predict_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description opts("kiln predict options");
  EvalOptions common;
  std::string output;
  std::int64_t top_k = 0;
  opts.add_options()("help,h", "show this help")
      ("output,o", po::value(&output)->required(), "the file to write: FILE.csv or FILE.jsonl")
      ("top-k,k", po::value(&top_k), "classes per sample, most probable first (default: 5, or all if fewer)");
  common.add_to(opts);
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln predict --run-dir DIR --output FILE.csv|FILE.jsonl [--checkpoint DIR] [--ema] [--top-k K] "
           "[--set key=value]...\n\n"
        << opts
        << "\nYour own images, without labels (every .jpeg/.jpg/.png under DIR; docs/eval-predict.md):\n"
           "  kiln predict --run-dir RUN --output photos.csv --set data.eval.type=imagenet \\\n"
           "    --set data.eval.root=DIR --set data.eval.layout=files\n";
    return 0;
  }
  po::notify(vm);
  const bool explicit_k = vm.count("top-k") > 0;

  train::EvalRequest request = common.request();
  request.every_sample = true;
  request.unlabeled_ok = true;  // predicting is what unlabeled images are for
  request.top_k_accuracy = false;  // the rows carry each sample's top k; no accuracy of it is reported
  // Checked first: a wrong extension or --top-k fails before the model is built.
  PredictionFile::check_name(output);
  if (explicit_k && top_k < 1) throw ConfigError(fmt::format("--top-k {} must be at least 1", top_k));
  train::EvalSession session(request);
  const std::int64_t classes = session.num_classes();
  if (explicit_k && top_k > classes) {
    throw ConfigError(fmt::format("--top-k {} is more than the model's {} classes", top_k, classes));
  }
  const std::int64_t k = explicit_k ? top_k : std::min(kDefaultTopK, classes);
  // A source names all of its samples or none (DataSource::sample_id), so the first one decides.
  const bool labeled = session.labeled();
  const PredictionFile::Columns columns{.ids = !session.sample_id(0).empty(), .labels = labeled};
  PredictionFile file(output, k, session.class_names(), columns);

  std::int64_t index = 0, correct = 0;
  const train::EvalSums sums = session.run_on_host([&](std::int64_t rows, const std::int32_t* y, const float* l) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(classes));
    for (std::int64_t r = 0; r < rows; ++r, ++index) {
      const std::vector<double> p = softmax(l + r * classes, classes);
      std::iota(order.begin(), order.end(), 0);
      // Stable: equal probabilities keep the lower class first, as an argmax does.
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return p[a] > p[b]; });
      std::vector<double> top_p(static_cast<std::size_t>(k));
      for (std::int64_t j = 0; j < k; ++j) top_p[j] = p[order[j]];
      file.write(index, columns.ids ? session.sample_id(index) : std::string(), y[r],
                 std::span(order.data(), static_cast<std::size_t>(k)), top_p);
      if (order[0] == y[r]) ++correct;
    }
  });
  file.commit();
  if (!labeled) {
    // The loss and accuracy of label-0 placeholders would mean nothing.
    out << fmt::format("predict  {} samples (unlabeled)  -> {}\n", index, output);
    return 0;
  }
  out << fmt::format("predict  {} samples  top-1 accuracy {:.4f}  (eval loss {:.4f})  -> {}\n", index,
                     index > 0 ? static_cast<double>(correct) / static_cast<double>(index) : 0.0, sums.loss(),
                     output);
  return 0;
}

}  // namespace kiln::cli
