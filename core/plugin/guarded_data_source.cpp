// A DataSource whose methods locate their exceptions (see kiln/plugin/guarded.hpp). read() runs
// on the loader's worker threads; the located error is what the loader hands to the trainer.
#include "kiln/plugin/guarded.hpp"

namespace kiln::plugin {
namespace {

class GuardedDataSource final : public DataSource {
 public:
  GuardedDataSource(std::shared_ptr<DataSource> inner, PluginOrigin origin)
      : inner_(std::move(inner)), origin_(std::move(origin)) {}

  std::string_view name() const override {
    return plugin_call(origin_, "name()", [&] { return inner_->name(); });
  }
  DatasetInfo describe() const override {
    return plugin_call(origin_, "describe()", [&] { return inner_->describe(); });
  }
  void read(std::int64_t index, std::uint64_t seed, const SampleSlot& out) const override {
    plugin_call(origin_, "read()", [&] { inner_->read(index, seed, out); });
  }
  std::map<std::string, double> counters() const override {
    return plugin_call(origin_, "counters()", [&] { return inner_->counters(); });
  }
  std::string sample_id(std::int64_t index) const override {
    return plugin_call(origin_, "sample_id()", [&] { return inner_->sample_id(index); });
  }

 private:
  std::shared_ptr<DataSource> inner_;
  PluginOrigin origin_;
};

}  // namespace

std::shared_ptr<DataSource> guarded(std::shared_ptr<DataSource> source, PluginOrigin origin) {
  return std::make_shared<GuardedDataSource>(std::move(source), std::move(origin));
}

}  // namespace kiln::plugin
