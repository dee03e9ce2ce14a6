// model.arch gpt2: the GPT-2 decoder (Radford et al. 2019): token + learned position
// embeddings, pre-LayerNorm blocks, a final LayerNorm and an LM head tied to the token
// embedding (or its own, model.tie_embeddings false). It knows nothing of parallelism or
// optimizers; it is a plain torch::nn::Module behind the Decoder interface.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "autoloco/config/config.hpp"
#include "autoloco/model/decoder.hpp"

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
// mlp.proj}.{weight,bias}, ln_f.{weight,bias}, and lm_head.weight when the head is untied
// (model_specs.cpp lists them). Initialisation (GPT-2): Linear/Embedding weights N(0, 0.02),
// biases 0, LayerNorm 1/0, residual projections N(0, 0.02/sqrt(2 n_layer)); the caller seeds it
// with torch::manual_seed.
class GPTImpl : public DecoderImpl {
 public:
  // Throws ConfigError when n_head does not divide d_model or a size is not positive.
  explicit GPTImpl(const ModelConfig& config);

  torch::nn::Embedding wte{nullptr};
  torch::nn::Embedding wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};  // untied heads only

 protected:
  torch::Tensor embed(const torch::Tensor& idx) override;
  torch::Tensor block(int64_t i, const torch::Tensor& x) override;
  torch::Tensor head(const torch::Tensor& x) override;

 private:
  void init_weights();
};
TORCH_MODULE(GPT);

}  // namespace autoloco
