// Parameter names and shapes by architecture, in registration order (gpt.cpp, llama.cpp).
#include "autoloco/model/model_specs.hpp"

#include <fmt/format.h>

#include <cmath>

namespace autoloco {
namespace {

void add(std::vector<ParamSpec>& out, std::string name, std::vector<int64_t> shape,
         bool embedding = false) {
  out.push_back({std::move(name), std::move(shape), embedding});
}

std::vector<ParamSpec> gpt2_specs(const ModelConfig& c) {
  const int64_t d = c.d_model;
  std::vector<ParamSpec> out;
  add(out, "wte.weight", {c.vocab_size, d}, true);
  add(out, "wpe.weight", {c.seq_len, d}, true);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string b = fmt::format("blocks.{}.", i);
    add(out, b + "ln_1.weight", {d});
    add(out, b + "ln_1.bias", {d});
    add(out, b + "attn.qkv.weight", {3 * d, d});
    add(out, b + "attn.qkv.bias", {3 * d});
    add(out, b + "attn.proj.weight", {d, d});
    add(out, b + "attn.proj.bias", {d});
    add(out, b + "ln_2.weight", {d});
    add(out, b + "ln_2.bias", {d});
    add(out, b + "mlp.fc.weight", {4 * d, d});
    add(out, b + "mlp.fc.bias", {4 * d});
    add(out, b + "mlp.proj.weight", {d, 4 * d});
    add(out, b + "mlp.proj.bias", {d});
  }
  add(out, "ln_f.weight", {d});
  add(out, "ln_f.bias", {d});
  if (!c.tie_embeddings) add(out, "lm_head.weight", {c.vocab_size, d}, true);
  return out;
}

std::vector<ParamSpec> llama_specs(const ModelConfig& c) {
  const int64_t d = c.d_model;
  const int64_t head = attention_head_dim(c);
  const int64_t q = c.n_head * head;
  const int64_t kv = kv_heads(c) * head;
  const int64_t h = llama_ffn_hidden(c);
  std::vector<ParamSpec> out;
  add(out, "embed_tokens.weight", {c.vocab_size, d}, true);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string b = fmt::format("blocks.{}.", i);
    add(out, b + "input_layernorm.weight", {d});
    add(out, b + "self_attn.q_proj.weight", {q, d});
    if (c.attention_bias) add(out, b + "self_attn.q_proj.bias", {q});
    add(out, b + "self_attn.k_proj.weight", {kv, d});
    if (c.attention_bias) add(out, b + "self_attn.k_proj.bias", {kv});
    add(out, b + "self_attn.v_proj.weight", {kv, d});
    if (c.attention_bias) add(out, b + "self_attn.v_proj.bias", {kv});
    add(out, b + "self_attn.o_proj.weight", {d, q});
    if (c.qk_norm) {
      add(out, b + "self_attn.q_norm.weight", {head});
      add(out, b + "self_attn.k_norm.weight", {head});
    }
    add(out, b + "post_attention_layernorm.weight", {d});
    add(out, b + "mlp.gate_proj.weight", {h, d});
    add(out, b + "mlp.up_proj.weight", {h, d});
    add(out, b + "mlp.down_proj.weight", {d, h});
  }
  add(out, "norm.weight", {d});
  if (!c.tie_embeddings) add(out, "lm_head.weight", {c.vocab_size, d}, true);
  return out;
}

}  // namespace

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (const int64_t s : shape)
    n *= s;
  return n;
}

int64_t attention_head_dim(const ModelConfig& c) {
  return c.arch == "llama" && c.head_dim > 0 ? c.head_dim : c.d_model / c.n_head;
}

int64_t kv_heads(const ModelConfig& c) {
  return c.arch == "llama" && c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
}

int64_t llama_ffn_hidden(const ModelConfig& c) {
  if (c.ffn_hidden > 0) return c.ffn_hidden;
  int64_t h = 2 * (4 * c.d_model) / 3;
  if (c.ffn_dim_multiplier > 0.0) {
    h = static_cast<int64_t>(std::floor(c.ffn_dim_multiplier * static_cast<double>(h)));
  }
  return c.multiple_of * ((h + c.multiple_of - 1) / c.multiple_of);
}

std::vector<ParamSpec> parameter_specs(const ModelConfig& c) {
  return c.arch == "llama" ? llama_specs(c) : gpt2_specs(c);
}

int64_t parameter_count(const ModelConfig& c) {
  int64_t n = 0;
  for (const ParamSpec& p : parameter_specs(c))
    n += p.numel();
  return n;
}

int64_t non_embedding_parameter_count(const ModelConfig& c) {
  int64_t n = 0;
  for (const ParamSpec& p : parameter_specs(c))
    n += p.embedding ? 0 : p.numel();
  return n;
}

double flops_per_token(const ModelConfig& c) {
  const auto n = static_cast<double>(non_embedding_parameter_count(c));
  const auto layers = static_cast<double>(c.n_layer);
  const auto d = static_cast<double>(c.d_model);
  // The attention's width: n_head heads of head_dim (d_model, unless model.head_dim says other).
  const auto width = static_cast<double>(c.n_head * attention_head_dim(c));
  return 6.0 * n + 12.0 * layers * width * static_cast<double>(c.seq_len) +
         6.0 * d * static_cast<double>(c.vocab_size);
}

int64_t unit_of_parameter(const ModelConfig& config, const std::string& name) {
  const std::string blocks = "blocks.";
  if (name.rfind(blocks, 0) == 0) return 1 + std::stoll(name.substr(blocks.size()));  // to '.'
  const std::string norm = config.arch == "llama" ? "norm." : "ln_f.";
  const bool head = name.rfind(norm, 0) == 0 || name.rfind("lm_head.", 0) == 0;
  return head ? config.n_layer + 1 : 0;
}

std::function<bool(const std::string& name)> block_parameters(const ModelConfig& config) {
  return [config](const std::string& name) {
    const int64_t unit = unit_of_parameter(config, name);
    return unit >= 1 && unit <= config.n_layer;
  };
}

std::vector<int64_t> unit_numels(const ModelConfig& config) {
  std::vector<int64_t> n(static_cast<size_t>(config.n_layer + 2), 0);
  for (const ParamSpec& p : parameter_specs(config))
    n[static_cast<size_t>(unit_of_parameter(config, p.name))] += p.numel();
  return n;
}

}  // namespace autoloco
