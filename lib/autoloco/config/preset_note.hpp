// What a failed check of the model keys adds when a preset is in play: the keys given beside the
// preset (in the config file or with --set) whose values replace the preset's, each with where
// it came from, so that "model.n_kv_head must divide model.n_head (4)" says that the 4 is the
// file's and the preset's was 32.
#pragma once

#include <map>
#include <string>

#include "autoloco/config/config.hpp"

namespace autoloco {

// `origin_of` maps "model.<key>" to where the run's value came from (a file's path, "--set").
// Empty when no preset is set or no key given beside it differs from the preset's.
std::string preset_override_note(const Config& config,
                                 const std::map<std::string, std::string>& origin_of);

}  // namespace autoloco
