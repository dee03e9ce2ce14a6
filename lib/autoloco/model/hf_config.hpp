// A Hugging Face config.json for our model keys and back: what transformers needs to build
// GPT2LMHeadModel or LlamaForCausalLM with the same sizes, and the check that a directory a run
// starts from (model.init_from) holds the model its keys describe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "autoloco/config/config.hpp"

namespace autoloco {

struct HfSpecialTokens {
  std::optional<int64_t> bos;
  std::optional<int64_t> eos;
};

// config.json (pretty-printed JSON) of the model the keys describe, weights in float32.
std::string hf_config_json(const ModelConfig& model, const HfSpecialTokens& tokens);

// generation_config.json: greedy by default, with the special tokens when known.
std::string hf_generation_config_json(const HfSpecialTokens& tokens);

// The model keys that DIR/config.json determines (arch, sizes, epsilon, rope_theta, head
// tying; seq_len from n_positions / max_position_embeddings). Throws ConfigError naming the
// file and the field for a model type or a feature we do not have (rope_scaling, biases in
// Llama, another activation), or a field that is missing or of the wrong type.
ModelConfig read_hf_config(const std::string& dir);

// Throws ConfigError naming model.init_from, the config key, both values and what to do when
// `hf` (read from `dir`) is not the model `run` describes. A llama run's seq_len may be shorter
// than the directory's max_position_embeddings; a gpt2 run's must equal n_positions (the
// position table's rows).
void check_hf_config(const ModelConfig& run, const ModelConfig& hf, const std::string& dir);

}  // namespace autoloco
