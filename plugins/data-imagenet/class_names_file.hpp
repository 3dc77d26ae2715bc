// `class_names_file`: a text file naming the classes, one per line, line 1 = class 0.
//
// ImageNet's class directories are WordNet ids (n01440764); what a person reads is "tench". The
// usual lists (imagenet_classes.txt, LOC_synset_mapping.txt) are one line per class in the sorted
// order of those ids, which is the order of the class indices here, so either file works as is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::imagenet {

/// Reads the names from `path` (`where` names the parameter in errors). Lines end in \n or \r\n;
/// one final empty line is allowed. Throws DataError naming path:line for an empty line or a
/// control character, and naming the path for a file that cannot be opened (with `where`), one
/// over 16 MiB and a count other than `num_classes`.
std::vector<std::string> read_class_names_file(const std::string& path, const std::string& where,
                                               std::int64_t num_classes);

}  // namespace kiln::imagenet
