// Class names (DatasetInfo::class_names): checked when a source describes them, compared between
// the sources and checkpoints that must number classes alike, and stored in checkpoints.
//
// Why compare: a label is only an index. An ImageFolder whose val split lacks one class directory
// numbers every later class one lower than its train split does, and a run then evaluates (or
// `kiln predict` labels) class 7 as class 8 with no error at all. Two lists agree when they name
// the same class at every index both have: a list that stops early (a val split without the last
// class) still numbers the classes it has alike.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/data_source.hpp"

namespace kiln::train {

using ClassNames = std::vector<std::string>;

/// Throws DataError naming `table` ("[data.train]") and the source when `info.class_names` breaks
/// the contract: more names than num_classes, an empty name, a control character.
void check_class_names(const DatasetInfo& info, std::string_view source, const std::string& table);

/// Where `a` (named by `a_what`) and `b` number classes differently: "class 3 is 'Dress' in
/// [data.train] but 'Coat' in [data.eval]". nullopt when they agree (or either is empty).
std::optional<std::string> class_names_conflict(const ClassNames& a, std::string_view a_what, const ClassNames& b,
                                                std::string_view b_what);

/// A short, comparable summary for messages between ranks: `10 names, "T-shirt/top" ... "Ankle
/// boot", crc32c 1b2c3d4e` (the checksum over every name tells lists of equal ends apart).
std::string class_names_summary(const ClassNames& names);

/// For the banner: `; 10 classes named "T-shirt/top" ... "Ankle boot"`, or "" without names.
std::string class_names_brief(const ClassNames& names);

/// The metadata key of model.safetensors that holds the names as a JSON array of strings.
inline constexpr const char* kClassNamesKey = "class_names";

/// The names as that JSON array, and back. parse throws DataError naming `file` for anything but
/// an array of strings that check_class_names would accept.
std::string class_names_json(const ClassNames& names);
ClassNames parse_class_names(const std::map<std::string, std::string>& metadata, const std::string& file);

}  // namespace kiln::train
