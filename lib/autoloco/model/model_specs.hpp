// A model's parameters as the config determines them, without building it: names and shapes
// in the order the module registers them. The counts in the start log, the presets' published
// counts (checked by a unit test), FLOPs per token and, later, memory plans all come from here,
// and a unit test checks that the built modules have exactly these parameters.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"

namespace autoloco {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  // The token or position embedding, or an untied head: what Kaplan et al.'s non-embedding
  // count leaves out.
  bool embedding = false;

  int64_t numel() const;
};

// Every parameter of model.arch with these sizes (a tied head is not listed twice).
std::vector<ParamSpec> parameter_specs(const ModelConfig& config);

// The llama MLP's hidden width: model.ffn_hidden, or Llama's rule h = 4d, h = floor(2h/3),
// h = floor(ffn_dim_multiplier h) when given, rounded up to a multiple of multiple_of.
int64_t llama_ffn_hidden(const ModelConfig& config);

// The width of one attention head: model.head_dim (llama), or d_model / n_head.
int64_t attention_head_dim(const ModelConfig& config);
// Key/value heads: model.n_kv_head, or n_head when 0 (and always for gpt2).
int64_t kv_heads(const ModelConfig& config);

int64_t parameter_count(const ModelConfig& config);

// The unit (decoder.hpp: 0 the embedding, 1..n_layer the blocks, n_layer + 1 the final norm and
// an untied head) that parameter `name` of model.arch belongs to.
int64_t unit_of_parameter(const ModelConfig& config, const std::string& name);
// Whether parameter `name` of model.arch belongs to a block (units 1..n_layer): the rule of
// optim/muon.hpp's muon_matrices.
std::function<bool(const std::string& name)> block_parameters(const ModelConfig& config);
// Each unit's parameter count, in unit order.
std::vector<int64_t> unit_numels(const ModelConfig& config);

// Without the embeddings and an untied head (the Kaplan et al. convention).
int64_t non_embedding_parameter_count(const ModelConfig& config);

// Training FLOPs (forward + backward) per token, PaLM/Chinchilla convention:
// 6 N (N = non-embedding parameters: 2 FLOPs per weight forward, 4 backward)
// + 12 n_layer (n_head head_dim) seq_len (the q.k^T and att.v matmuls over the full context;
// with grouped-query attention the query heads still span n_head head_dim, d_model unless
// model.head_dim says other)
// + 6 d_model vocab_size (the LM-head matmul, which N leaves out whether or not it is tied,
// yet it is a real matmul and for small models a large share of the work).
double flops_per_token(const ModelConfig& config);

}  // namespace autoloco
