// How our parameters are named and laid out in a Hugging Face checkpoint of the same
// architecture: GPT2LMHeadModel (transformer.h.<i>..., its Conv1D weights stored [in, out], the
// transpose of our Linear's [out, in]) and LlamaForCausalLM (model.layers.<i>..., our names
// otherwise, since the Llama modules carry transformers' names). A tied head is not stored:
// transformers drops lm_head.weight when it is the embedding.
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

// The architectures' class names in config.json ("GPT2LMHeadModel", "LlamaForCausalLM").
std::string hf_architecture(const ModelConfig& config);

}  // namespace autoloco
