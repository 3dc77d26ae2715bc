// Did-you-mean suggestions for plugin names (private to core/plugin).
//
// The config module has its own copy for config keys; this one is kept local so the loader
// does not depend on the config module. Edit distance counts a swap of two adjacent letters as
// one edit; a suggestion is made within 2 edits or a third of the word's length, if larger.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::plugin {

/// Optimal-string-alignment distance: insert, delete, substitute, swap adjacent letters (1 each).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// " (did you mean 'x'?)" for the closest candidate close enough to `word`, else "".
std::string suggest_name(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace kiln::plugin
