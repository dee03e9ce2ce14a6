// The model section of the run configuration: architecture, sizes, the Llama family's variants,
// a preset and a Hugging Face directory to start from.
// Part of the typed run configuration (config.hpp): every key declared once in visit(), with
// its default and a one-line doc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autoloco {

struct ModelConfig {
  std::string arch = "gpt2";
  std::string preset;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_kv_head = 0;
  int64_t d_model = 128;
  int64_t seq_len = 128;
  int64_t vocab_size = 256;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::string rope_scaling = "none";
  double rope_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_seq_len = 8192;
  int64_t head_dim = 0;
  bool attention_bias = false;
  bool qk_norm = false;
  std::string family = "auto";
  int64_t ffn_hidden = 0;
  int64_t multiple_of = 256;
  double ffn_dim_multiplier = 0.0;
  bool tie_embeddings = true;
  std::string recompute = "none";
  std::string init_from;
  // Not a key: the model keys that model.init_from's config.json gave ("model.n_layer", ...),
  // for the start log; the effective config holds their values.
  std::vector<std::string> described;

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("arch", s.arch,
      "architecture: gpt2 (learned positions, LayerNorm, GELU) or llama (RoPE, RMSNorm, SwiGLU, "
      "grouped-query attention); docs/models.md");
    v("preset", s.preset,
      "a named size (gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama-tiny, llama-small, "
      "llama-3.2-1b, llama-3.2-3b, llama-3-8b, llama-3.1-8b, llama-2-7b, qwen2.5-0.5b, "
      "qwen3-0.6b, smollm2-135m, mistral-7b-v0.3) whose keys the other model keys given beside "
      "it override; empty: none");
    v("n_layer", s.n_layer, "transformer blocks");
    v("n_head", s.n_head, "attention heads per block; must divide d_model");
    v("n_kv_head", s.n_kv_head,
      "llama: key/value heads (grouped-query attention), dividing n_head; 0: n_head");
    v("d_model", s.d_model, "residual stream width");
    v("seq_len", s.seq_len, "context length in tokens");
    v("vocab_size", s.vocab_size, "vocabulary size; must cover every token id in the shards");
    v("norm_eps", s.norm_eps,
      "epsilon of the normalisations (LayerNorm for gpt2, RMSNorm for llama)");
    v("rope_theta", s.rope_theta, "llama: base of the rotary embeddings' frequencies");
    v("rope_scaling", s.rope_scaling,
      "llama: the rotary frequencies' scaling, as transformers' rope_scaling: none, linear "
      "(positions divided by rope_factor) or llama3 (Llama 3.1's rule: the low frequencies "
      "divided by rope_factor, the high ones kept, a smooth blend between); docs/models.md");
    v("rope_factor", s.rope_factor,
      "llama: rope_scaling's factor (transformers' rope_scaling.factor); Llama 3.1's 8 by default");
    v("rope_low_freq_factor", s.rope_low_freq_factor,
      "llama: rope_scaling llama3's low_freq_factor: wavelengths above rope_original_seq_len / "
      "this are divided by rope_factor");
    v("rope_high_freq_factor", s.rope_high_freq_factor,
      "llama: rope_scaling llama3's high_freq_factor: wavelengths below rope_original_seq_len / "
      "this are kept");
    v("rope_original_seq_len", s.rope_original_seq_len,
      "llama: rope_scaling llama3's original_max_position_embeddings, the context the model was "
      "first trained at");
    v("head_dim", s.head_dim,
      "llama: width of each attention head (Qwen3 sets it apart from d_model / n_head); 0: "
      "d_model / n_head");
    v("attention_bias", s.attention_bias,
      "llama: biases on the query, key and value projections (Qwen2 and Qwen2.5); the output "
      "projection has none");
    v("qk_norm", s.qk_norm,
      "llama: an RMSNorm over each head of the queries and keys before the rotation (Qwen3)");
    v("family", s.family,
      "llama: the Hugging Face model_type that `autoloco-ckpt export --format hf` writes (llama, "
      "mistral, qwen2, qwen3); auto: qwen3 with qk_norm, qwen2 with attention_bias, else llama");
    v("ffn_hidden", s.ffn_hidden,
      "llama: hidden width of the SwiGLU MLP; 0: Llama's rule from d_model, ffn_dim_multiplier "
      "and multiple_of");
    v("multiple_of", s.multiple_of,
      "llama: the rule's hidden width is rounded up to a multiple of this");
    v("ffn_dim_multiplier", s.ffn_dim_multiplier,
      "llama: the rule multiplies 2/3 of 4 d_model by this before rounding; 0: not at all");
    v("tie_embeddings", s.tie_embeddings,
      "the LM head is the token embedding; default true for gpt2, false for llama (and the "
      "preset's choice)");
    v("recompute", s.recompute,
      "activation recomputation: none (backward reads every activation its forward kept), or "
      "blocks (each transformer block keeps only its input and runs its forward again in "
      "backward: a block's activations instead of all of them, for about one more forward)");
    v("init_from", s.init_from,
      "a Hugging Face model directory (config.json + safetensors) whose weights start the run; "
      "the model keys the run leaves unset come from its config.json, and those it sets must "
      "equal it; empty: random initialisation");
  }
};

}  // namespace autoloco
