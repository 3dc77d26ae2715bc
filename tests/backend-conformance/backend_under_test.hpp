// The backend test_backend_conformance runs the suite on: made once, in main.cpp, before
// Boost.Test starts, from the build tree's plugin of the name given after `--`.
#pragma once

#include <string>

#include "kiln/backend.hpp"

namespace kiln::conformance {

/// Makes the backend of plugin `name` through the plugin registry with its default parameters
/// (allow_tf32 = false where the plugin has that key: f32 is checked at f32 accuracy), then the
/// KILN_CONFORMANCE_PARAMS="key=value ..." overrides. Throws whatever the plugin's factory throws.
void make_backend_under_test(const std::string& name);
/// The backend made by make_backend_under_test (throws before).
Backend& backend_under_test();

/// Adds one Boost test case per variant of every case group of the suite to the master suite,
/// each skipped (with the reason) where the backend's supports() says no.
void add_suite_cases();

}  // namespace kiln::conformance
