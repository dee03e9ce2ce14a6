// Named model sizes (model.preset): the published configurations of GPT-2 and Llama, whose
// parameter counts equal the published ones (tests/unit/test_model_specs.cpp counts them), and
// small ones that train on a CPU. A preset sets every model key it names; keys given beside it
// in the config or with --set override it.
#pragma once

#include <string>
#include <vector>

#include "autoloco/config/config.hpp"

namespace autoloco {

// The names model.preset accepts, in the order docs/models.md lists them.
std::vector<std::string> model_preset_names();

// Sets the preset's keys in `model` (its name included); throws ConfigError naming
// model.preset, with the nearest name, when there is no such preset.
void apply_model_preset(const std::string& name, ModelConfig& model);

}  // namespace autoloco
