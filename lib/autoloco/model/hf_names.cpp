#include "autoloco/model/hf_names.hpp"

#include "autoloco/model/model_specs.hpp"

namespace autoloco {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// GPT-2's block modules as transformers names them (Conv1D: c_attn, c_proj, c_fc).
std::string gpt2_block_part(const std::string& part) {
  static const std::vector<std::pair<std::string, std::string>> renames = {
      {"attn.qkv.", "attn.c_attn."},
      {"attn.proj.", "attn.c_proj."},
      {"mlp.fc.", "mlp.c_fc."},
      {"mlp.proj.", "mlp.c_proj."},
  };
  for (const auto& [ours, theirs] : renames) {
    if (starts_with(part, ours)) return theirs + part.substr(ours.size());
  }
  return part;  // ln_1, ln_2
}

HfParam gpt2_param(const ParamSpec& p) {
  HfParam out{p.name, p.name, p.shape, false};
  if (p.name == "lm_head.weight") return out;
  if (starts_with(p.name, "blocks.")) {
    const auto dot = p.name.find('.', 7);
    const std::string part = p.name.substr(dot + 1);
    out.hf = "transformer.h." + p.name.substr(7, dot - 7) + "." + gpt2_block_part(part);
    out.transposed = ends_with(p.name, ".weight") && p.shape.size() == 2;
  } else {
    out.hf = "transformer." + p.name;  // wte, wpe, ln_f
  }
  return out;
}

HfParam llama_param(const ParamSpec& p) {
  HfParam out{p.name, p.name, p.shape, false};
  if (p.name == "lm_head.weight") return out;
  if (starts_with(p.name, "blocks.")) {
    out.hf = "model.layers." + p.name.substr(7);
  } else {
    out.hf = "model." + p.name;  // embed_tokens, norm
  }
  return out;
}

}  // namespace

std::vector<HfParam> hf_params(const ModelConfig& config) {
  std::vector<HfParam> out;
  for (const ParamSpec& p : parameter_specs(config))
    out.push_back(config.arch == "llama" ? llama_param(p) : gpt2_param(p));
  return out;
}

std::string hf_model_type(const ModelConfig& config) {
  if (config.arch != "llama") return "gpt2";
  if (config.family != "auto") return config.family;
  if (config.qk_norm) return "qwen3";
  return config.attention_bias ? "qwen2" : "llama";
}

std::string hf_architecture(const ModelConfig& config) {
  const std::string type = hf_model_type(config);
  if (type == "mistral") return "MistralForCausalLM";
  if (type == "qwen2") return "Qwen2ForCausalLM";
  if (type == "qwen3") return "Qwen3ForCausalLM";
  return type == "llama" ? "LlamaForCausalLM" : "GPT2LMHeadModel";
}

}  // namespace autoloco
