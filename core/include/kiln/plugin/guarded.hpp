// Plugin objects whose every method reports its exceptions as coming from that plugin.
//
// `kiln train` wraps the data sources, the model, the precision policy and the communicator it
// gets from the Registry in these decorators, so an exception from any of their methods, on
// whichever thread (a data source's read() runs on loader workers), reaches the user as one
// line naming the plugin, its library and the method (plugin_call.hpp).
//
// Why decorators for these four kinds and not try/catch at each call site: they are called
// from many places in the core (loader workers, trainer, GradSync, parameter broadcast,
// checkpoints), and a decorator covers every present and future caller at once. Each of their
// methods runs once per sample, step or gradient bucket, so the one extra indirect call is
// noise. The Backend is deliberately not wrapped: its ops run hundreds of times per step, a
// wrapper would add a call to each and would have to track every op added to the interface;
// the trainer's backend calls are located at its boundary instead (run.cpp).
#pragma once

#include <memory>

#include "kiln/communicator.hpp"
#include "kiln/data_source.hpp"
#include "kiln/model.hpp"
#include "kiln/plugin/plugin_call.hpp"
#include "kiln/precision_policy.hpp"

namespace kiln::plugin {

std::shared_ptr<DataSource> guarded(std::shared_ptr<DataSource> source, PluginOrigin origin);
std::shared_ptr<Model> guarded(std::shared_ptr<Model> model, PluginOrigin origin);
std::shared_ptr<PrecisionPolicy> guarded(std::shared_ptr<PrecisionPolicy> policy, PluginOrigin origin);
/// The Work handles its collectives return are wrapped too, so a failed wait() is located.
std::shared_ptr<Communicator> guarded(std::shared_ptr<Communicator> comm, PluginOrigin origin);

}  // namespace kiln::plugin
