// Options and output of `kiln eval`. The figures are those of a run's "test" records in
// metrics.jsonl (loss, accuracy, samples), computed by the trainer's own evaluation pass; the
// JSON form uses the metrics writer's number formatting, so the two compare exactly; that includes
// the top-5 accuracy of a model of more than five classes (top_k_counter.hpp).
#include "eval_command.hpp"

#include <boost/program_options.hpp>

#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "eval_options.hpp"
#include "kiln/io/metrics_writer.hpp"
#include "kiln/train/eval_session.hpp"
#include "per_class_report.hpp"

namespace kiln::cli {
namespace po = boost::program_options;

int run_eval_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description opts("kiln eval options");
  EvalOptions common;
  opts.add_options()("help,h", "show this help")("json", "print one JSON object instead of a line")(
      "per-class", "also precision, recall and F1 of each class, with its name where the run knows it");
  common.add_to(opts);
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln eval --run-dir DIR [--checkpoint DIR] [--ema] [--set key=value]... [--json] [--per-class]\n\n"
        << opts
        << "\n";
    return 0;
  }
  po::notify(vm);

  train::EvalSession session(common.request());
  std::optional<PerClassReport> per_class;
  if (vm.count("per-class")) per_class.emplace(session.num_classes(), session.class_names());
  auto on_batch = [&](std::int64_t rows, const std::int32_t* labels, const float* logits) {
    per_class->add(rows, labels, logits);
  };
  // Only the per-class table needs the logits on the host; top-1 and top-5 are counted where the
  // logits are. Top-5 comes only where it says something: with 5 classes or fewer every sample is a hit.
  const train::EvalSums sums = per_class ? session.run_on_host(on_batch) : session.run();
  const std::optional<double> top_k_accuracy = sums.top_k_accuracy();
  if (vm.count("json")) {
    io::MetricsRecord rec;
    rec.add("checkpoint", session.checkpoint().string());
    if (common.ema) rec.add("weights", std::string("ema"));
    rec.add("loss", sums.loss())
        .add("accuracy", sums.accuracy());
    if (top_k_accuracy) rec.add("accuracy_top5", *top_k_accuracy);
    rec.add("samples", static_cast<std::int64_t>(sums.samples));
    std::string json = rec.to_json();
    // The record is flat; the per-class array goes in as the last member.
    if (per_class) json.insert(json.size() - 1, ", \"per_class\": " + per_class->json());
    out << json << "\n";
  } else {
    const std::string top5 = top_k_accuracy ? fmt::format("  top-5 {:.4f}", *top_k_accuracy) : "";
    out << fmt::format("eval  loss {:.4f}  accuracy {:.4f}{}  samples {}  checkpoint {}{}\n", sums.loss(),
                       sums.accuracy(), top5, static_cast<std::int64_t>(sums.samples), session.checkpoint().string(),
                       common.ema ? " (averaged weights)" : "");
    if (per_class) per_class->write_table(out);
  }
  return 0;
}

}  // namespace kiln::cli
