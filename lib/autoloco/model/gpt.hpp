// The GPT-2-style decoder that every rank trains: token + learned position embeddings,
// pre-LayerNorm blocks, a final LayerNorm and an LM head tied to the token embedding.
// The model knows nothing of parallelism or optimizers; it is a plain torch::nn::Module.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "autoloco/config/config.hpp"

namespace autoloco {

// Causal multi-head self-attention with one fused q/k/v projection.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear qkv{nullptr};
  // A residual output projection: initialised with a smaller std (see GPTImpl).
  torch::nn::Linear proj{nullptr};

 private:
  int64_t n_head_;
  int64_t d_model_;
};
TORCH_MODULE(CausalSelfAttention);

// d -> 4d -> d feed-forward with GPT-2's tanh-approximated GELU.
class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr};
  // A residual output projection: initialised with a smaller std (see GPTImpl).
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(MLP);

// x + attn(ln_1(x)), then + mlp(ln_2(x)).
class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

// Parameter names: wte.weight, wpe.weight, blocks.<i>.{ln_1,attn.qkv,attn.proj,ln_2,mlp.fc,
// mlp.proj}.{weight,bias}, ln_f.{weight,bias}. The LM head has no parameter of its own.
// Initialisation (GPT-2): Linear/Embedding weights N(0, 0.02), biases 0, LayerNorm 1/0, residual
// projections N(0, 0.02/sqrt(2 n_layer)); the caller seeds it with torch::manual_seed.
class GPTImpl : public torch::nn::Module {
 public:
  // Throws ConfigError when n_head does not divide d_model or a size is not positive.
  explicit GPTImpl(const ModelConfig& config);

  // idx: int64 [B, T] with T <= seq_len; returns logits [B, T, vocab_size].
  torch::Tensor forward(const torch::Tensor& idx);

  const ModelConfig& config() const { return config_; }

  torch::nn::Embedding wte{nullptr};
  torch::nn::Embedding wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  void init_weights();

  ModelConfig config_;
};
TORCH_MODULE(GPT);

// Mean cross-entropy in nats of logits [B, T, V] against targets int64 [B, T].
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// Every trainable scalar, counted once (the tied head adds nothing).
int64_t parameter_count(const GPT& model);

// Without the token and position embeddings (the Kaplan et al. convention).
int64_t non_embedding_parameter_count(const GPT& model);

// The same number in closed form from the config: n_layer (12 d^2 + 13 d) + 2 d.
int64_t non_embedding_parameter_count(const ModelConfig& config);

// Training FLOPs (forward + backward) per token, PaLM/Chinchilla convention:
// 6 N (N = non-embedding parameters: 2 FLOPs per weight forward, 4 backward)
// + 12 n_layer d_model seq_len (the q.k^T and att.v matmuls, counted over the full context)
// + 6 d_model vocab_size (the tied LM-head matmul, which N leaves out because its weight is the
// embedding, yet it is a real matmul and for small models a large share of the work).
double flops_per_token(const ModelConfig& config);

}  // namespace autoloco
