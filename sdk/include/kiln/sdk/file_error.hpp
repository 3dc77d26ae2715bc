// Errors located in an input file, for data plugins: "<path>:<line>:<column>: <what>".
//
//   if (fields.size() != 3)
//     throw kiln::sdk::file_error(path, line, column, "expected 3 fields, found 2");
//
// The file:line:column form is the one editors and terminals turn into a link, and the one
// config errors use, so a bad row in a CSV reads like a bad key in run.toml. When the core calls
// the plugin, it prefixes the plugin and the method: "data plugin 'csv' (libkiln-data-csv.so),
// read(): data/train.csv:12:7: expected 3 fields, found 2".
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "kiln/errors.hpp"

namespace kiln::sdk {

/// A DataError whose message is "<path>:<line>:<column>: <what>". Lines and columns count from
/// 1; pass column 0 when only the line is known ("<path>:<line>: <what>"), and line 0 too when
/// not even that is ("<path>: <what>").
DataError file_error(const std::filesystem::path& path, std::int64_t line, std::int64_t column,
                     std::string_view what);

}  // namespace kiln::sdk
