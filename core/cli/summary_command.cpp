// Options and output of `kiln summary` (see the header).
#include "summary_command.hpp"

#include <boost/program_options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>

#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"
#include "kiln/train/model_summary.hpp"

namespace kiln::cli {
namespace po = boost::program_options;
namespace {

using train::ModelSummary;
using train::SummaryTensor;

/// 25557032 -> "25,557,032": sizes people compare at a glance.
std::string grouped(std::int64_t count) {
  const std::string digits = std::to_string(count);  // counts of values: never negative
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string mib(double bytes) { return fmt::format("{:.2f} MiB", bytes / (1024.0 * 1024.0)); }

/// Rows of text in columns, each as wide as its widest cell; the last column is not padded.
void print_columns(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right, std::ostream& out) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::size_t pad = width[c] - row[c].size();
      const bool last = c + 1 == row.size();
      if (right[c]) line += std::string(pad, ' ') + row[c];
      else line += row[c] + (last ? "" : std::string(pad, ' '));
      if (!last) line += "  ";
    }
    out << line << '\n';
  }
}

/// The group a name falls in at `depth`: its first `depth` dot-separated parts, never the last
/// part ("conv1.weight" -> "conv1" at any depth; "layer1.0.conv1.weight" -> "layer1.0" at 2).
std::string group_of(const std::string& name, int depth) {
  std::size_t end = 0;
  for (int d = 0; d < depth; ++d) {
    const std::size_t dot = name.find('.', end == 0 ? 0 : end + 1);
    if (dot == std::string::npos) break;
    end = dot;
  }
  return end == 0 ? name : name.substr(0, end);
}

std::string decay_text(const SummaryTensor& p) { return p.trains ? fmt::format("{:g}", p.weight_decay) : "-"; }

void print_text(const ModelSummary& s, int depth, bool buffers, std::ostream& out) {
  out << fmt::format("model      {} ({}): input {} {}, {} classes\n", s.model, s.library, dtype_name(s.input.dtype),
                     shape_string(s.input.sample_shape), s.input.num_classes);
  out << fmt::format("precision  {}: master weights {}, compute {}\n", s.precision, dtype_name(s.param_dtype),
                     dtype_name(s.compute_dtype));
  out << fmt::format("optimizer  {}, weight_decay {:g} (biases and normalisation weights take none)\n", s.optimizer,
                     s.weight_decay);
  if (!s.freeze.empty()) out << s.freeze << '\n';
  if (!s.init_file.empty()) {
    std::map<std::string, int> by_state;
    for (const auto* rows : {&s.parameters, &s.buffers}) {
      for (const SummaryTensor& t : *rows) ++by_state[t.init];
    }
    out << fmt::format("init       {}: {} tensors loaded, {} kept fresh by init_exclude, {} missing from the file\n",
                       s.init_file, by_state["loaded"], by_state["init_exclude"], by_state["missing"]);
  }
  out << '\n';

  std::int64_t total = 0, trainable = 0;
  for (const SummaryTensor& p : s.parameters) {
    total += p.values;
    if (p.trains) trainable += p.values;
  }
  if (depth > 0) {
    // Groups in the order their first tensor comes.
    std::vector<std::string> order;
    std::map<std::string, std::array<std::int64_t, 3>> sums;  // tensors, values, trainable values
    for (const SummaryTensor& p : s.parameters) {
      const std::string g = group_of(p.name, depth);
      if (!sums.count(g)) order.push_back(g);
      auto& sum = sums[g];
      sum[0] += 1;
      sum[1] += p.values;
      sum[2] += p.trains ? p.values : 0;
    }
    std::vector<std::vector<std::string>> rows = {{"name", "tensors", "values", "trainable"}};
    for (const std::string& g : order) {
      const auto& sum = sums[g];
      rows.push_back({g, std::to_string(sum[0]), grouped(sum[1]), grouped(sum[2])});
    }
    print_columns(rows, {false, true, true, true}, out);
  } else {
    // The init column only when [model] init names a file.
    const bool init = !s.init_file.empty();
    std::vector<std::vector<std::string>> rows = {{"name", "shape", "values", "trains", "weight decay"}};
    if (init) rows[0].push_back("init");
    for (const SummaryTensor& p : s.parameters) {
      rows.push_back({p.name, shape_string(p.shape), grouped(p.values), p.trains ? "yes" : "frozen", decay_text(p)});
      if (init) rows.back().push_back(p.init);
    }
    print_columns(rows, {false, false, true, false, false, false}, out);
  }
  if (buffers && !s.buffers.empty()) {
    out << '\n';
    const bool init = !s.init_file.empty();
    std::vector<std::vector<std::string>> rows = {{"buffer", "shape", "dtype", "values", "in training"}};
    if (init) rows[0].push_back("init");
    for (const SummaryTensor& b : s.buffers) {
      rows.push_back({b.name, shape_string(b.shape), std::string(dtype_name(b.dtype)), grouped(b.values),
                      b.frozen_buffer ? "kept as is (frozen_bn = \"eval\")" : "updated"});
      if (init) rows.back().push_back(b.init);
    }
    print_columns(rows, {false, false, false, true, false, false}, out);
  }
  std::int64_t buffer_values = 0;
  double buffer_bytes = 0;
  for (const SummaryTensor& b : s.buffers) {
    buffer_values += b.values;
    buffer_bytes += static_cast<double>(b.values) * static_cast<double>(dtype_size(b.dtype));
  }
  out << fmt::format("\nparameters {} tensors, {} values ({} as {}): {} trainable, {} frozen\n", s.parameters.size(),
                     grouped(total), mib(static_cast<double>(total) * static_cast<double>(dtype_size(s.param_dtype))),
                     dtype_name(s.param_dtype), grouped(trainable), grouped(total - trainable));
  out << fmt::format("buffers    {} tensors, {} values ({}){}\n", s.buffers.size(), grouped(buffer_values),
                     mib(buffer_bytes), buffers || s.buffers.empty() ? "" : "; --buffers lists them");
}

std::string shape_json(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

/// `, "init": "loaded"` with [model] init, nothing without.
std::string init_json(const SummaryTensor& t) {
  return t.init.empty() ? "" : fmt::format(", \"init\": {}", io::json_quoted(t.init));
}

void print_json(const ModelSummary& s, std::ostream& out) {
  using io::json_quoted;
  std::vector<std::string> params, buffers;
  for (const SummaryTensor& p : s.parameters) {
    params.push_back(fmt::format("{{\"name\": {}, \"shape\": {}, \"values\": {}, \"trains\": {}, \"weight_decay\": {}{}}}",
                                 json_quoted(p.name), shape_json(p.shape), p.values, p.trains ? "true" : "false",
                                 p.weight_decay, init_json(p)));
  }
  for (const SummaryTensor& b : s.buffers) {
    buffers.push_back(fmt::format("{{\"name\": {}, \"shape\": {}, \"dtype\": {}, \"values\": {}, \"frozen\": {}{}}}",
                                  json_quoted(b.name), shape_json(b.shape), json_quoted(dtype_name(b.dtype)), b.values,
                                  b.frozen_buffer ? "true" : "false", init_json(b)));
  }
  out << fmt::format(
      "{{\"model\": {}, \"library\": {}, \"input\": {{\"shape\": {}, \"dtype\": {}}}, \"classes\": {}, "
      "\"precision\": {}, \"param_dtype\": {}, \"compute_dtype\": {}, \"optimizer\": {}, \"weight_decay\": {}, "
      "\"parameters\": [{}], \"buffers\": [{}]}}\n",
      json_quoted(s.model), json_quoted(s.library), shape_json(s.input.sample_shape), json_quoted(dtype_name(s.input.dtype)),
      s.input.num_classes, json_quoted(s.precision), json_quoted(dtype_name(s.param_dtype)),
      json_quoted(dtype_name(s.compute_dtype)), json_quoted(s.optimizer), s.weight_decay, fmt::join(params, ", "),
      fmt::join(buffers, ", "));
}

}  // namespace

int run_summary_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description opts("kiln summary options");
  train::SummaryRequest request;
  std::string config;
  std::vector<std::string> plugin_paths;
  int depth = 0;
  opts.add_options()
      ("help,h", "show this help")
      ("config,c", po::value(&config)->required(), "training config whose model to describe")
      ("set,s", po::value(&request.overrides)->composing(), "override a config key (repeatable), e.g. --set model.hidden=[256]")
      ("plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directory, searched first (repeatable)")
      ("depth,d", po::value(&depth), "add the parameters up by the first N parts of their names (1: conv1, layer1, fc)")
      ("buffers", "also list the buffers (batch-norm running statistics)")
      ("json", "print one JSON object (every parameter and buffer) instead of the tables");
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln summary --config FILE [--set key=value]... [--depth N] [--buffers] [--json]\n\n" << opts << "\n";
    return 0;
  }
  po::notify(vm);
  if (vm.count("depth") && depth < 1) throw po::error("--depth must be 1 or more (or left out: every tensor)");
  if (vm.count("json") && (depth > 0 || vm.count("buffers"))) {
    throw po::error("--json lists every parameter and buffer; leave out --depth and --buffers");
  }
  request.config = config;
  request.plugin_dirs.assign(plugin_paths.begin(), plugin_paths.end());
  const ModelSummary summary = train::summarize_model(request);
  if (vm.count("json")) print_json(summary, out);
  else print_text(summary, depth, vm.count("buffers") > 0, out);
  return 0;
}

}  // namespace kiln::cli
