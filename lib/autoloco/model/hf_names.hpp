// How our parameters are named and laid out in a Hugging Face checkpoint of the same
// architecture: GPT2LMHeadModel (transformer.h.<i>..., its Conv1D weights stored [in, out], the
// transpose of our Linear's [out, in]) and the Llama family's LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM (model.layers.<i>..., our names
// otherwise, since the Llama modules carry transformers' names, q_norm and k_norm included). A
// tied head is not stored: transformers drops lm_head.weight when it is the embedding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"

namespace autoloco {

struct HfParam {
  std::string ours;
  std::string hf;
  std::vector<int64_t> shape;  // ours; the stored one is its transpose when `transposed`
  bool transposed = false;
};

// Every parameter of the model the config describes, in our registration order.
std::vector<HfParam> hf_params(const ModelConfig& config);

// config.json's model_type: gpt2, or model.family for llama (auto: qwen3 with qk_norm, qwen2
// with attention_bias, else llama).
std::string hf_model_type(const ModelConfig& config);

// The architecture's class name in config.json ("GPT2LMHeadModel", "Qwen3ForCausalLM", ...).
std::string hf_architecture(const ModelConfig& config);

}  // namespace autoloco
