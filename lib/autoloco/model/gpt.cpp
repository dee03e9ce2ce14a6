// The GPT-2 decoder: module definitions and GPT-2 initialisation.
#include "autoloco/model/gpt.hpp"

#include <cmath>

#include "autoloco/model/attention.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr double kInitStd = 0.02;

torch::nn::LayerNorm layer_norm(const ModelConfig& config) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model}).eps(config.norm_eps));
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& config)
    : qkv(register_module("qkv", torch::nn::Linear(config.d_model, 3 * config.d_model))),
      proj(register_module("proj", torch::nn::Linear(config.d_model, config.d_model))),
      n_head_(config.n_head),
      d_model_(config.d_model) {}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0);
  const int64_t t = x.size(1);
  const int64_t head_dim = d_model_ / n_head_;
  // [B, T, 3C] -> three [B, n_head, T, head_dim]
  auto heads = [&](const torch::Tensor& part) {
    return part.view({b, t, n_head_, head_dim}).transpose(1, 2);
  };
  const auto parts = qkv->forward(x).split(d_model_, /*dim=*/2);
  const auto y = causal_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]));
  return proj->forward(y.transpose(1, 2).contiguous().view({b, t, d_model_}));
}

MLPImpl::MLPImpl(const ModelConfig& config)
    : fc(register_module("fc", torch::nn::Linear(config.d_model, 4 * config.d_model))),
      proj(register_module("proj", torch::nn::Linear(4 * config.d_model, config.d_model))) {}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return proj->forward(torch::gelu(fc->forward(x), "tanh"));
}

BlockImpl::BlockImpl(const ModelConfig& config)
    : ln_1(register_module("ln_1", layer_norm(config))),
      attn(register_module("attn", CausalSelfAttention(config))),
      ln_2(register_module("ln_2", layer_norm(config))),
      mlp(register_module("mlp", MLP(config))) {}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto h = x + attn->forward(ln_1->forward(x));
  return h + mlp->forward(ln_2->forward(h));
}

GPTImpl::GPTImpl(const ModelConfig& config) : DecoderImpl(config) {
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.d_model));
  wpe = register_module("wpe", torch::nn::Embedding(config.seq_len, config.d_model));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i)
    blocks->push_back(Block(config));
  ln_f = register_module("ln_f", layer_norm(config));
  if (!config.tie_embeddings) {
    lm_head = register_module(
        "lm_head",
        torch::nn::Linear(torch::nn::LinearOptions(config.d_model, config.vocab_size).bias(false)));
  }
  init_weights();
}

void GPTImpl::init_weights() {
  torch::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, kInitStd);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = m->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, kInitStd);
    } else if (auto* norm = m->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
  // Each block adds two outputs to the residual stream; scaling them keeps its variance at
  // initialisation independent of depth.
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config().n_layer));
  for (const auto& m : *blocks) {
    auto* block = m->as<BlockImpl>();
    block->attn->proj->weight.normal_(0.0, residual_std);
    block->mlp->proj->weight.normal_(0.0, residual_std);
  }
}

torch::Tensor GPTImpl::embed(const torch::Tensor& idx) {
  const auto pos = torch::arange(idx.size(1), idx.options().dtype(torch::kLong));
  return wte->forward(idx) + wpe->forward(pos);
}

torch::Tensor GPTImpl::block(int64_t i, const torch::Tensor& x) {
  return blocks[static_cast<size_t>(i)]->as<BlockImpl>()->forward(x);
}

torch::Tensor GPTImpl::head(const torch::Tensor& x) {
  const torch::Tensor h = ln_f->forward(x);
  // Tied head: the token embedding doubles as the output projection.
  return lm_head ? lm_head->forward(h) : torch::matmul(h, wte->weight.t());
}

}  // namespace autoloco
