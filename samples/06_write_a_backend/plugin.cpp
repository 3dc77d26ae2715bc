// The library descriptor of libkiln-backend-naive.so: one plugin, the `naive` backend.
//
// KILN_PLUGIN_LIBRARY (kiln/sdk/plugin.hpp) exports the descriptor the loader reads before it
// calls anything here: kind, name, version, summary, parameter schema and the factory, stamped
// with the contract fingerprint of the headers this was compiled against. The backend takes no
// parameters, so its [backend] table holds only `type = "naive"`; any other key (such as the
// cpu backend's `threads`) is refused by the core with a "did you mean" before the factory runs.
#include <kiln/sdk/plugin.hpp>

#include "naive_backend.hpp"

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Backend, kiln::naive::NaiveBackend>(
    "naive", "0.1.0",
    "Teaching backend: every op as plain C++ loops on the host, f32 only, sums in double (sample 06)."));
