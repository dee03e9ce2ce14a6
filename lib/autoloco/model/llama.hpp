// model.arch llama: the Llama decoder (Touvron et al. 2023; Grattafiori et al. 2024): RMSNorm,
// rotary position embeddings in Hugging Face's rotate-half layout (so weights need no
// permutation on export; rope.hpp), grouped-query attention, a SwiGLU MLP, and a head tied to
// the embedding or not (model.tie_embeddings). The family's variants are keys: q/k/v biases
// (Qwen2), an RMSNorm of each query and key head (Qwen3), a head width apart from
// d_model / n_head, and the rotary scalings. ALGORITHMS.md §5 gives the formulas.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "autoloco/config/config.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/model/rope.hpp"

namespace autoloco {

// x / sqrt(mean(x^2) + eps) * weight, the mean taken in float32 whatever x's dtype.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const Rotary& rope);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr};
  // A residual output projection: initialised with a smaller std (see LlamaImpl).
  torch::nn::Linear o_proj{nullptr};
  // model.qk_norm: over each head of the queries and keys, before the rotation; else null.
  RMSNorm q_norm{nullptr}, k_norm{nullptr};

 private:
  int64_t n_head_;
  int64_t n_kv_head_;
  int64_t head_dim_;
};
TORCH_MODULE(LlamaAttention);

// down(silu(gate(x)) * up(x)).
class LlamaMLPImpl : public torch::nn::Module {
 public:
  explicit LlamaMLPImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr};
  // A residual output projection: initialised with a smaller std (see LlamaImpl).
  torch::nn::Linear down_proj{nullptr};
};
TORCH_MODULE(LlamaMLP);

// h = x + attn(norm(x)), then h + mlp(norm(h)).
class LlamaBlockImpl : public torch::nn::Module {
 public:
  explicit LlamaBlockImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const Rotary& rope);

  RMSNorm input_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  RMSNorm post_attention_layernorm{nullptr};
  LlamaMLP mlp{nullptr};
};
TORCH_MODULE(LlamaBlock);

// Parameter names: embed_tokens.weight, blocks.<i>.{input_layernorm, self_attn.q_proj,
// self_attn.k_proj, self_attn.v_proj, self_attn.o_proj, post_attention_layernorm,
// mlp.gate_proj, mlp.up_proj, mlp.down_proj}.weight, norm.weight, and lm_head.weight when the
// head is untied: Hugging Face's names with "model.layers." spelled "blocks." (hf_names.cpp).
// Initialisation: Linear/Embedding weights N(0, 0.02), norms 1, and the residual projections
// (o_proj, down_proj) N(0, 0.02/sqrt(2 n_layer)) as in GPT-2, so that the residual stream's
// variance at initialisation does not grow with depth.
class LlamaImpl : public DecoderImpl {
 public:
  // Throws ConfigError on sizes Llama cannot have (see validate.cpp for the config's checks).
  explicit LlamaImpl(const ModelConfig& config);

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};  // untied heads only

 protected:
  torch::Tensor embed(const torch::Tensor& idx) override;
  torch::Tensor block(int64_t i, const torch::Tensor& x) override;
  torch::Tensor head(const torch::Tensor& x) override;

 private:
  void init_weights();
  // The rotary tables for x's length on x's device, kept while they fit the next block.
  const Rotary& rope_for(const torch::Tensor& x);

  Rotary rope_;
};
TORCH_MODULE(Llama);

}  // namespace autoloco
