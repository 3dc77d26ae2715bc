// Fine-tuning from a safetensors file (see init_weights.hpp for the rules).
#include "kiln/train/init_weights.hpp"
#include "kiln/train/collective_purpose.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kiln/errors.hpp"
#include "kiln/sdk/half.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/train/name_list.hpp"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kCounterSuffix = ".num_batches_tracked";
constexpr std::size_t kListedNames = 12;  // names a message lists before "... and N more"
constexpr std::int64_t kMessageBytes = 8192;  // rank 0's error, as broadcast to the other ranks

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string listed(const std::vector<std::string>& names) { return listed_names(names, kListedNames); }

bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64; }

/// `src` (a host tensor of any float dtype) as a new host tensor of `dtype` (a float dtype).
Tensor converted(const Tensor& src, DType dtype) {
  if (src.dtype() == dtype) return src;
  const auto n = static_cast<std::size_t>(src.numel());
  std::vector<double> values(n);
  switch (src.dtype()) {
    case DType::f32: std::copy_n(src.data_as<float>(), n, values.begin()); break;
    case DType::f64: std::copy_n(src.data_as<double>(), n, values.begin()); break;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) values[i] = sdk::f16_to_f32(src.data_as<std::uint16_t>()[i]);
      break;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) values[i] = sdk::bf16_to_f32(src.data_as<std::uint16_t>()[i]);
      break;
    default: throw ConfigError(fmt::format("cannot convert {} to {}", dtype_name(src.dtype()), dtype_name(dtype)));
  }
  Tensor out = host_tensor(src.shape(), dtype);
  for (std::size_t i = 0; i < n; ++i) {
    const auto f = static_cast<float>(values[i]);
    switch (dtype) {
      case DType::f32: out.data_as<float>()[i] = f; break;
      case DType::f64: out.data_as<double>()[i] = values[i]; break;
      case DType::f16: out.data_as<std::uint16_t>()[i] = sdk::f32_to_f16(f); break;
      case DType::bf16: out.data_as<std::uint16_t>()[i] = sdk::f32_to_bf16(f); break;
      default: throw ConfigError(fmt::format("cannot convert {} to {}", dtype_name(src.dtype()), dtype_name(dtype)));
    }
  }
  return out;
}

/// Index and value of the first NaN or infinity in host tensor `t` (a float dtype), if any.
std::optional<std::pair<std::size_t, double>> first_non_finite(const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  for (std::size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (t.dtype()) {
      case DType::f32: v = t.data_as<float>()[i]; break;
      case DType::f64: v = t.data_as<double>()[i]; break;
      case DType::f16: v = sdk::f16_to_f32(t.data_as<std::uint16_t>()[i]); break;
      case DType::bf16: v = sdk::bf16_to_f32(t.data_as<std::uint16_t>()[i]); break;
      default: return std::nullopt;
    }
    if (!std::isfinite(v)) return std::make_pair(i, v);
  }
  return std::nullopt;
}

/// init_exclude patterns that would keep the tensors named in `names` fresh: "head.*" for
/// "head.weight", "layers.2.*" for "layers.2.bias".
std::string exclude_patterns_for(const std::vector<std::string>& names) {
  std::vector<std::string> patterns;
  for (const std::string& name : names) {
    const std::size_t dot = name.rfind('.');
    const std::string pattern = "\"" + (dot == std::string::npos ? name : name.substr(0, dot) + ".*") + "\"";
    if (std::find(patterns.begin(), patterns.end(), pattern) == patterns.end()) patterns.push_back(pattern);
  }
  return fmt::format("{}", fmt::join(patterns, ", "));
}

/// One model tensor that init may fill: a parameter's master value or a buffer.
struct Target {
  std::string name;
  Tensor value;
};

}  // namespace

std::optional<InitRequest> init_request(const ParamMap& host) {
  const std::string& file = host.get_string("init");
  const auto& exclude = host.get<std::vector<std::string>>("init_exclude");
  if (file.empty()) {
    if (!exclude.empty()) {
      throw ConfigError(fmt::format("{} lists patterns but model.init names no file to load; set model.init or "
                                    "remove init_exclude",
                                    host.where("init_exclude")));
    }
    return std::nullopt;
  }
  for (const std::string& pattern : exclude) {
    if (pattern.empty()) {
      throw ConfigError(fmt::format("{} has an empty pattern; write globs such as \"fc.*\"", host.where("init_exclude")));
    }
  }
  InitRequest r;
  r.file = file;
  r.strict = host.get_bool("init_strict");
  r.exclude = exclude;
  r.where = host.where("init");
  return r;
}

std::shared_ptr<const InitWeights> read_init_weights(const InitRequest& request) {
  std::error_code ec;
  const fs::file_status st = fs::status(request.file, ec);
  if (!fs::exists(st)) throw ConfigError(fmt::format("{}: no such file {}", request.where, request.file.string()));
  if (!fs::is_regular_file(st)) {
    throw ConfigError(fmt::format("{}: {} is not a file; name a safetensors file", request.where,
                                  request.file.string()));
  }
  auto init = std::make_shared<InitWeights>();
  init->request = request;
  try {
    init->contents = io::read_safetensors(request.file);
  } catch (const Error& e) {
    // A PyTorch .pt/.pth (a zip of pickles) lands here too; say how to make the right file.
    throw ConfigError(fmt::format("{}: {} is not a readable safetensors file ({}); save a state dict with "
                                  "safetensors.torch.save_file(model.state_dict(), path)",
                                  request.where, request.file.string(), e.what()));
  }
  return init;
}

InitReport load_init_weights(const InitWeights& init, Backend& backend, const Model& model) {
  const InitRequest& req = init.request;
  const auto& file = init.contents.tensors;
  std::vector<bool> pattern_used(req.exclude.size(), false);
  auto excluded = [&](const std::string& name) {
    bool hit = false;
    for (std::size_t i = 0; i < req.exclude.size(); ++i) {
      if (fnmatch(req.exclude[i].c_str(), name.c_str(), 0) == 0) hit = pattern_used[i] = true;
    }
    return hit;
  };

  std::vector<Target> targets;
  for (const Parameter& p : model.parameters()) targets.push_back({p.name, p.value});
  for (const ModelBuffer& b : model.buffers()) targets.push_back({b.name, b.value});

  // Everything is checked before anything is copied: a refused file leaves the model as built.
  InitReport report;
  std::vector<std::string> bad;  // shape and dtype mismatches, each naming the tensor
  std::vector<std::string> misfits;  // their names
  std::vector<std::pair<const Target*, const Tensor*>> copies;
  std::set<std::string> model_names;
  for (const Target& t : targets) {
    model_names.insert(t.name);
    if (excluded(t.name)) {
      report.excluded.push_back(t.name);
      continue;
    }
    auto it = file.find(t.name);
    if (it == file.end()) {
      report.missing.push_back(t.name);
      continue;
    }
    const Tensor& src = it->second;
    if (src.shape() != t.value.shape()) {
      bad.push_back(fmt::format("'{}' is {} in the file but {} in the model", t.name, shape_string(src.shape()),
                                shape_string(t.value.shape())));
      misfits.push_back(t.name);
    } else if (!is_float(src.dtype())) {
      bad.push_back(fmt::format("'{}' is stored as {}, which is not a floating dtype (f32, f16, bf16, f64)", t.name,
                                dtype_name(src.dtype())));
    } else {
      copies.emplace_back(&t, &src);
    }
  }
  for (const auto& [name, tensor] : file) {
    if (excluded(name)) report.skipped.push_back(name);
    else if (model_names.count(name)) continue;
    else if (ends_with(name, kCounterSuffix)) report.counters.push_back(name);
    else report.unexpected.push_back(name);
  }
  for (std::size_t i = 0; i < req.exclude.size(); ++i) {
    if (!pattern_used[i]) report.unused_patterns.push_back("\"" + req.exclude[i] + "\"");
  }

  const std::string file_name = req.file.string();
  if (!bad.empty()) {
    const std::string hint = report.excluded.empty() && req.exclude.empty() && !misfits.empty()
                                 ? fmt::format("; a layer that changed on purpose (a new head) can keep its fresh "
                                               "initialisation with init_exclude = [{}]",
                                               exclude_patterns_for(misfits))
                                 : "";
    throw ConfigError(fmt::format("{}: {} does not fit the model: {}{}", req.where, file_name, listed(bad), hint));
  }
  std::vector<std::string> problems;
  if (!report.missing.empty()) {
    problems.push_back(fmt::format("{} model tensors missing from the file: {}", report.missing.size(),
                                   listed(report.missing)));
  }
  if (!report.unexpected.empty()) {
    problems.push_back(fmt::format("{} file tensors the model does not have: {}", report.unexpected.size(),
                                   listed(report.unexpected)));
  }
  if (!report.unused_patterns.empty()) {
    problems.push_back(fmt::format("init_exclude patterns matching no tensor: {}", listed(report.unused_patterns)));
  }
  auto log = log::get("train");
  if (!problems.empty()) {
    const std::string text = fmt::format("{}", fmt::join(problems, "; "));
    if (req.strict) {
      throw ConfigError(fmt::format("{}: {}: {}; fix the names, exclude them with init_exclude, or set "
                                    "init_strict = false to load what matches",
                                    req.where, file_name, text));
    }
    log->warn("init {} (init_strict = false): {}{}", file_name, text,
              report.missing.empty() ? "" : "; the missing tensors keep their fresh initialisation");
  }

  // A copy to a device may only be enqueued when copy() returns: the host tensors live until the
  // synchronize.
  // Converted (a huge f64 can become an f32 infinity) and checked before the first copy: weights
  // that are NaN or infinite would only show as a non-finite training loss at step 1, blaming the
  // learning rate or the data, and a NaN batch-norm statistic not even then.
  std::vector<Tensor> staged;
  std::vector<std::string> non_finite;
  for (const auto& [target, src] : copies) {
    staged.push_back(converted(*src, target->value.dtype()));
    if (const auto at = first_non_finite(staged.back())) {
      non_finite.push_back(fmt::format("'{}'[{}] is {}", target->name, at->first, at->second));
    }
  }
  if (!non_finite.empty()) {
    throw ConfigError(fmt::format("{}: {} holds values that are not finite ({} of the tensors to load: {}); it is "
                                  "no starting point (saved from a run that diverged?)",
                                  req.where, file_name, non_finite.size(), listed(non_finite)));
  }
  for (std::size_t i = 0; i < copies.size(); ++i) {
    backend.copy(staged[i], copies[i].first->value);
    report.loaded.push_back(copies[i].first->name);
  }
  backend.synchronize();
  std::string line = fmt::format("init: {} of {} model tensors loaded from {}", report.loaded.size(), targets.size(),
                                 file_name);
  if (!report.excluded.empty()) line += fmt::format("; kept fresh (init_exclude): {}", listed(report.excluded));
  if (!report.skipped.empty()) line += fmt::format("; file tensors skipped (init_exclude): {}", report.skipped.size());
  if (!report.counters.empty()) {
    line += fmt::format("; ignored {} num_batches_tracked counters (Kiln's batch norm keeps none)",
                        report.counters.size());
  }
  log->info("{}", line);
  return report;
}

InitReport load_init_weights_on_rank0(const InitWeights* init, Backend& backend, Communicator& comm,
                                      const Model& model) {
  InitReport report;
  std::exception_ptr failure;
  std::string message;
  if (comm.rank() == 0) {
    try {
      if (init == nullptr) throw Error("internal error: rank 0 was asked to load init weights but holds none");
      report = load_init_weights(*init, backend, model);
    } catch (const std::exception& e) {
      failure = std::current_exception();
      message = e.what();
    }
  }
  if (comm.size() > 1) {
    // The outcome travels as text: empty = loaded; else the error, cut to the buffer.
    Tensor host = host_tensor({kMessageBytes}, DType::u8);
    std::memset(host.data(), 0, kMessageBytes);
    std::memcpy(host.data(), message.data(), std::min<std::size_t>(message.size(), kMessageBytes - 1));
    Tensor dev = backend.allocate({kMessageBytes}, DType::u8, MemoryKind::device);
    backend.copy(host, dev);
    const CollectivePurpose purpose("rank 0's message about model.init");
    comm.broadcast(dev, 0)->wait();
    backend.copy(dev, host);
    if (comm.rank() != 0) message = std::string(static_cast<const char*>(host.data()));
  }
  if (failure) std::rethrow_exception(failure);
  if (!message.empty()) throw ConfigError(message);
  return report;
}

}  // namespace kiln::train
