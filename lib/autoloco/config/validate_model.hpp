// The model section's checks (validate.cpp calls them): sizes, the llama family's options, and
// keys that only a llama block reads refused under gpt2.
#pragma once

#include "autoloco/config/model_config.hpp"

namespace autoloco {

// Throws ConfigError naming the key and what would be valid.
void validate_model(const ModelConfig& m);

}  // namespace autoloco
