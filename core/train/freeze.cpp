// [model] freeze: which parameters training leaves as they are (see freeze.hpp).
#include "kiln/train/freeze.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <cstdint>

#include "kiln/errors.hpp"
#include "kiln/sdk/param_runs.hpp"
#include "kiln/train/name_list.hpp"

namespace kiln::train {
namespace {

constexpr std::size_t kListedNames = 8;  // names a message or the log line lists before "..."

std::string listed(const std::vector<std::string>& names) { return listed_names(names, kListedNames); }

}  // namespace

std::optional<FreezeRequest> freeze_request(const ParamMap& model_host) {
  const std::string& frozen_bn = model_host.get_string("frozen_bn");
  // "train" or "eval": the schema's choices (model_table.cpp), checked when the table was validated.
  const Mode batch_norm = frozen_bn == "eval" ? Mode::eval : Mode::train;
  const auto& patterns = model_host.get<std::vector<std::string>>("freeze");
  if (patterns.empty() && batch_norm == Mode::eval) {
    throw ConfigError(fmt::format("{} = \"eval\" acts on the batch-norm layers that model.freeze freezes, but freeze "
                                  "is empty; list the frozen layers' parameters in freeze (e.g. [\"conv1.*\", "
                                  "\"bn1.*\", \"layer[1-3].*\"])",
                                  model_host.where("frozen_bn")));
  }
  if (patterns.empty()) return std::nullopt;
  for (const std::string& pattern : patterns) {
    if (pattern.empty()) {
      throw ConfigError(fmt::format("{} has an empty pattern; write globs of parameter names such as \"layer1.*\"",
                                    model_host.where("freeze")));
    }
  }
  FreezeRequest request{patterns, model_host.where("freeze")};
  request.batch_norm = batch_norm;
  request.batch_norm_where = model_host.where("frozen_bn");
  return request;
}

bool FreezeRequest::matches(std::string_view parameter) const {
  const std::string name(parameter);
  for (const std::string& pattern : patterns) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

FrozenParameters::FrozenParameters(std::span<const Parameter> params, const FreezeRequest& request,
                                   std::string_view model)
    : where_(request.where), model_(model) {
  std::vector<std::string> unmatched;
  for (const std::string& pattern : request.patterns) {
    bool hit = false;
    for (const Parameter& p : params) {
      if (fnmatch(pattern.c_str(), p.name.c_str(), 0) == 0) {
        names_.insert(p.name);
        hit = true;
      }
    }
    if (!hit) unmatched.push_back(fmt::format("'{}'", pattern));
  }
  for (const Parameter& p : params) {
    if ((p.flags & kParamFrozen) != 0 && !contains(p)) {
      throw PluginError(fmt::format("model '{}' marks parameter '{}' frozen (kParamFrozen), but {} does not name "
                                    "it; the model would leave out a gradient the run trains on (a bug in the "
                                    "model plugin: mark exactly the parameters ModelBuildContext::frozen names)",
                                    model_, p.name, where_));
    }
  }
  if (!unmatched.empty()) {
    std::vector<std::string> examples;
    for (const Parameter& p : params) examples.push_back(p.name);
    throw ConfigError(fmt::format("{}: {} {} no parameter of the model; its parameters are {}", where_,
                                  fmt::join(unmatched, ", "), unmatched.size() == 1 ? "matches" : "match",
                                  listed(examples)));
  }
  if (names_.size() == params.size()) {
    throw ConfigError(fmt::format("{} freezes every parameter of the model ({}), so training would change "
                                  "nothing; leave the layers to train out of the patterns",
                                  where_, params.size()));
  }
}

std::vector<Tensor> FrozenParameters::grad_views(std::span<const Parameter> params) const {
  // Runs are taken over consecutive frozen parameters only: sdk::grad_runs would join two frozen
  // parameters across a trainable one between them, and zeroing that view would zero its gradient.
  std::vector<Tensor> views;
  std::size_t i = 0;
  while (i < params.size()) {
    if (!contains(params[i])) {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < params.size() && contains(params[j])) ++j;
    for (Tensor& run : sdk::grad_runs(params.subspan(i, j - i))) views.push_back(std::move(run));
    i = j;
  }
  return views;
}

std::string FrozenParameters::describe(std::span<const Parameter> params) const {
  std::int64_t frozen_values = 0, all_values = 0;
  std::size_t marked = 0;
  std::vector<std::string> trainable;
  for (const Parameter& p : params) {
    all_values += p.value.numel();
    if (contains(p)) {
      frozen_values += p.value.numel();
      if ((p.flags & kParamFrozen) != 0) ++marked;
    } else {
      trainable.push_back(p.name);
    }
  }
  // A model that read ModelBuildContext::frozen marks what it was told; one that did not computes
  // every gradient (correct, only slower), which a user comparing step times should know.
  const std::string backward =
      marked == names_.size()
          ? fmt::format("{} skips their backward work", model_)
          : fmt::format("{} computes their gradients anyway ({} of {} marked kParamFrozen; it does not read "
                        "ModelBuildContext::frozen)",
                        model_, marked, names_.size());
  return fmt::format("freeze: {} of {} tensors ({} of {} values) by {}; trainable: {}; {}", names_.size(),
                     params.size(), frozen_values, all_values, where_, listed(trainable), backward);
}

std::optional<std::string> check_frozen_buffers(std::span<const ModelBuffer> buffers, const FreezeRequest& request,
                                                std::string_view model) {
  std::vector<std::string> marked;
  for (const ModelBuffer& b : buffers) {
    if ((b.flags & kBufferFrozen) != 0) marked.push_back(b.name);
  }
  if (request.batch_norm == Mode::train) {
    if (marked.empty()) return std::nullopt;
    throw PluginError(fmt::format("model '{}' marks buffer '{}' frozen (kBufferFrozen), but model.frozen_bn is "
                                  "\"train\"; its batch-norm layers would not update their running statistics "
                                  "as asked (a bug in the model plugin: mark buffers only under "
                                  "ModelBuildContext::frozen_bn = Mode::eval)",
                                  model, marked.front()));
  }
  if (marked.empty()) {
    throw ConfigError(fmt::format(
        "{} = \"eval\", but model '{}' keeps no running statistics frozen: it has no batch-norm layer whose "
        "weight and bias {} both freezes{}, or it does not read ModelBuildContext::frozen_bn; remove the key",
        request.batch_norm_where, model, request.where,
        buffers.empty() ? " (it has no buffers at all)" : ""));
  }
  return fmt::format("frozen_bn = \"eval\" by {}: {} of {} running statistics (model buffers) stay as they are; "
                     "their batch-norm layers normalise with them in training too: {}",
                     request.batch_norm_where, marked.size(), buffers.size(), listed(marked));
}

}  // namespace kiln::train
