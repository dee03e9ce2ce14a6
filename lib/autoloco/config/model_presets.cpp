// The preset table. Sources: GPT-2's released configs (Radford et al. 2019; Hugging Face
// gpt2*, n_positions 1024, vocab 50257, tied head); Llama 2 (Touvron et al. 2023) and Llama 3 /
// 3.1 / 3.2 (Grattafiori et al. 2024), Qwen2.5 (Qwen team 2024), Qwen3 (2025), SmolLM2 (Allal
// et al. 2025) and Mistral 7B v0.3 (Jiang et al. 2023) as released on Hugging Face
// (config.json: hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim, intermediate_size, rope_theta, rope_scaling, rms_norm_eps, attention_bias,
// tie_word_embeddings). Meta's MLP widths are given through Llama's rule (multiple_of,
// ffn_dim_multiplier) as its params.json does, so that a preset with another d_model keeps the
// family's proportions (ALGORITHMS.md §5); the others' are their intermediate_size.
#include "autoloco/config/model_presets.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <utility>

#include "autoloco/config/suggest.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

struct Preset {
  const char* name;
  std::function<void(ModelConfig&)> apply;
};

void gpt2(ModelConfig& m, int64_t layers, int64_t heads, int64_t width) {
  m.arch = "gpt2";
  m.n_layer = layers;
  m.n_head = heads;
  m.n_kv_head = 0;
  m.d_model = width;
  m.seq_len = 1024;
  m.vocab_size = 50257;
  m.norm_eps = 1e-5;
  m.tie_embeddings = true;
}

struct LlamaShape {
  int64_t layers, heads, kv_heads, width, vocab, seq_len;
  double theta;
  int64_t multiple_of;
  double multiplier;
  bool tied;
};

void llama(ModelConfig& m, const LlamaShape& s) {
  m.arch = "llama";
  m.n_layer = s.layers;
  m.n_head = s.heads;
  m.n_kv_head = s.kv_heads;
  m.d_model = s.width;
  m.vocab_size = s.vocab;
  m.seq_len = s.seq_len;
  m.norm_eps = 1e-5;
  m.rope_theta = s.theta;
  m.ffn_hidden = 0;
  m.multiple_of = s.multiple_of;
  m.ffn_dim_multiplier = s.multiplier;
  m.tie_embeddings = s.tied;
  m.rope_scaling = "none";
  m.head_dim = 0;
  m.attention_bias = false;
  m.qk_norm = false;
  m.family = "auto";
}

// Llama 3.1's rope scaling with its published settings and factor `factor` (8 for 3.1, 32 for
// 3.2): frequency factors 1 and 4, an original context of 8192.
void llama3_rope(ModelConfig& m, double factor) {
  m.rope_scaling = "llama3";
  m.rope_factor = factor;
  m.rope_low_freq_factor = 1.0;
  m.rope_high_freq_factor = 4.0;
  m.rope_original_seq_len = 8192;
}

// A llama-family model whose MLP width is given, not ruled; eps and theta as released.
void released(ModelConfig& m, const LlamaShape& s, int64_t ffn_hidden, double eps) {
  llama(m, s);
  m.ffn_hidden = ffn_hidden;
  m.norm_eps = eps;
}

const std::vector<Preset>& presets() {
  // Llama 3's vocabulary is 128,256 tokens; Llama 2's 32,000. The small ones read the byte
  // shards of the default corpus (vocabulary 256).
  static const std::vector<Preset> table = {
      {"gpt2", [](ModelConfig& m) { gpt2(m, 12, 12, 768); }},
      {"gpt2-medium", [](ModelConfig& m) { gpt2(m, 24, 16, 1024); }},
      {"gpt2-large", [](ModelConfig& m) { gpt2(m, 36, 20, 1280); }},
      {"gpt2-xl", [](ModelConfig& m) { gpt2(m, 48, 25, 1600); }},
      {"llama-tiny",
       [](ModelConfig& m) {
         llama(m, {4, 8, 4, 256, 256, 256, 10000.0, 64, 0.0, false});
       }},
      {"llama-small",
       [](ModelConfig& m) {
         llama(m, {6, 6, 2, 384, 256, 512, 10000.0, 64, 0.0, false});
       }},
      {"llama-3.2-1b",
       [](ModelConfig& m) {
         llama(m, {16, 32, 8, 2048, 128256, 2048, 500000.0, 256, 1.5, true});
         llama3_rope(m, 32.0);
       }},
      {"llama-3.2-3b",
       [](ModelConfig& m) {
         llama(m, {28, 24, 8, 3072, 128256, 2048, 500000.0, 256, 1.0, true});
         llama3_rope(m, 32.0);
       }},
      {"llama-3-8b",
       [](ModelConfig& m) {
         llama(m, {32, 32, 8, 4096, 128256, 2048, 500000.0, 1024, 1.3, false});
       }},
      {"llama-3.1-8b",
       [](ModelConfig& m) {
         llama(m, {32, 32, 8, 4096, 128256, 2048, 500000.0, 1024, 1.3, false});
         llama3_rope(m, 8.0);
       }},
      {"qwen2.5-0.5b",
       [](ModelConfig& m) {
         released(m, {24, 14, 2, 896, 151936, 2048, 1000000.0, 256, 0.0, true}, 4864, 1e-6);
         m.attention_bias = true;
         m.family = "qwen2";
       }},
      {"qwen3-0.6b",
       [](ModelConfig& m) {
         released(m, {28, 16, 8, 1024, 151936, 2048, 1000000.0, 256, 0.0, true}, 3072, 1e-6);
         m.head_dim = 128;
         m.qk_norm = true;
         m.family = "qwen3";
       }},
      {"smollm2-135m",
       [](ModelConfig& m) {
         released(m, {30, 9, 3, 576, 49152, 2048, 100000.0, 256, 0.0, true}, 1536, 1e-5);
       }},
      {"mistral-7b-v0.3",
       [](ModelConfig& m) {
         released(m, {32, 32, 8, 4096, 32768, 2048, 1000000.0, 256, 0.0, false}, 14336, 1e-5);
         m.family = "mistral";
       }},
      {"llama-2-7b",
       [](ModelConfig& m) {
         llama(m, {32, 32, 32, 4096, 32000, 2048, 10000.0, 256, 0.0, false});
       }},
  };
  return table;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets())
    names.emplace_back(p.name);
  return names;
}

void apply_model_preset(const std::string& name, ModelConfig& model) {
  for (const Preset& p : presets()) {
    if (name == p.name) {
      p.apply(model);
      model.preset = name;
      return;
    }
  }
  throw ConfigError(fmt::format("config key model.preset: no preset named '{}'{}; the presets: {}",
                                name, did_you_mean(name, model_preset_names()),
                                fmt::format("{}", fmt::join(model_preset_names(), ", "))));
}

}  // namespace autoloco
