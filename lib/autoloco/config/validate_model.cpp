// The model section's checks. Each message names the key and says what would be valid.
#include "autoloco/config/validate_model.hpp"

#include <fmt/format.h>

#include "autoloco/config/validate_rules.hpp"

namespace autoloco {
namespace {

using config_rules::require;
using config_rules::require_non_negative;
using config_rules::require_one_of;
using config_rules::require_positive;

// Keys that only a llama block reads: under gpt2 a value other than the default is a mistake
// the user should hear of, not a silent no-op.
void validate_llama_only_keys(const ModelConfig& m) {
  const ModelConfig defaults;
  const auto llama_only = [&](bool differs, const char* key) {
    require(!differs, key,
            fmt::format("applies to model.arch llama only; this run's is {}", m.arch));
  };
  llama_only(m.n_kv_head != 0 && m.n_kv_head != m.n_head, "model.n_kv_head");
  llama_only(m.rope_theta != defaults.rope_theta, "model.rope_theta");
  llama_only(m.ffn_hidden != defaults.ffn_hidden, "model.ffn_hidden");
  llama_only(m.multiple_of != defaults.multiple_of, "model.multiple_of");
  llama_only(m.ffn_dim_multiplier != defaults.ffn_dim_multiplier, "model.ffn_dim_multiplier");
  llama_only(m.rope_scaling != defaults.rope_scaling, "model.rope_scaling");
  llama_only(m.head_dim != defaults.head_dim, "model.head_dim");
  llama_only(m.attention_bias != defaults.attention_bias, "model.attention_bias");
  llama_only(m.qk_norm != defaults.qk_norm, "model.qk_norm");
  llama_only(m.family != defaults.family, "model.family");
}

// What each Hugging Face class can hold: Mistral's and Llama's attention have no query/key
// norms, Mistral's no biases, Qwen2's always has q/k/v biases and no norms.
void validate_family(const ModelConfig& m) {
  require_one_of(m.family, {"auto", "llama", "mistral", "qwen2", "qwen3"}, "model.family");
  const auto holds = [&](bool ok, const std::string& why) {
    require(ok, "model.family",
            fmt::format("{} {}: set model.family to one that has it, or auto", m.family, why));
  };
  if (m.family == "llama" || m.family == "mistral") {
    holds(!m.qk_norm, "has no model.qk_norm (qwen3 has)");
  }
  if (m.family == "mistral") holds(!m.attention_bias, "has no model.attention_bias");
  if (m.family == "qwen2") {
    holds(m.attention_bias, "always has model.attention_bias: true");
    holds(!m.qk_norm, "has no model.qk_norm (qwen3 has)");
  }
}

// Llama 3.1's rope scaling (Grattafiori et al. 2024; transformers' rope_type "llama3") and the
// linear rule: their keys' ranges.
void validate_rope_scaling(const ModelConfig& m) {
  require_one_of(m.rope_scaling, {"none", "linear", "llama3"}, "model.rope_scaling");
  if (m.rope_scaling == "none") return;
  require(
      m.rope_factor >= 1.0, "model.rope_factor",
      fmt::format("rope_scaling {} needs a factor >= 1, got {}", m.rope_scaling, m.rope_factor));
  if (m.rope_scaling != "llama3") return;
  require(m.rope_low_freq_factor > 0.0, "model.rope_low_freq_factor",
          fmt::format("must be > 0, got {}", m.rope_low_freq_factor));
  require(m.rope_high_freq_factor > m.rope_low_freq_factor, "model.rope_high_freq_factor",
          fmt::format("must exceed model.rope_low_freq_factor ({}), got {}", m.rope_low_freq_factor,
                      m.rope_high_freq_factor));
  require_positive(m.rope_original_seq_len, "model.rope_original_seq_len");
}

void validate_llama(const ModelConfig& m) {
  const int64_t kv = m.n_kv_head == 0 ? m.n_head : m.n_kv_head;
  require(kv > 0 && m.n_head % kv == 0, "model.n_kv_head",
          fmt::format("must divide model.n_head ({}), got {}", m.n_head, m.n_kv_head));
  require_non_negative(m.head_dim, "model.head_dim");
  const int64_t head = m.head_dim > 0 ? m.head_dim : m.d_model / m.n_head;
  require(head % 2 == 0, m.head_dim > 0 ? "model.head_dim" : "model.n_head",
          fmt::format("rotary embeddings need an even head width, got {}{}", head,
                      m.head_dim > 0 ? "" : " (d_model / n_head)"));
  require(m.rope_theta > 1.0, "model.rope_theta", fmt::format("must be > 1, got {}", m.rope_theta));
  validate_rope_scaling(m);
  validate_family(m);
  require_non_negative(m.ffn_hidden, "model.ffn_hidden");
  require_positive(m.multiple_of, "model.multiple_of");
  require(m.ffn_dim_multiplier >= 0.0, "model.ffn_dim_multiplier",
          fmt::format("must be >= 0 (0: none), got {}", m.ffn_dim_multiplier));
}

}  // namespace

void validate_model(const ModelConfig& m) {
  require_one_of(m.arch, {"gpt2", "llama"}, "model.arch");
  require_one_of(m.recompute, {"none", "blocks"}, "model.recompute");
  require_positive(m.n_layer, "model.n_layer");
  require_positive(m.n_head, "model.n_head");
  require_positive(m.d_model, "model.d_model");
  require_positive(m.seq_len, "model.seq_len");
  require(m.vocab_size >= 2, "model.vocab_size", fmt::format("must be >= 2, got {}", m.vocab_size));
  require(m.head_dim > 0 || m.d_model % m.n_head == 0, "model.n_head",
          fmt::format("must divide model.d_model: {} % {} = {} (or set model.head_dim)", m.d_model,
                      m.n_head, m.d_model % m.n_head));
  require(m.norm_eps > 0.0 && m.norm_eps < 1.0, "model.norm_eps",
          fmt::format("must be in (0, 1), got {}", m.norm_eps));
  if (m.arch == "llama") {
    validate_llama(m);
  } else {
    validate_llama_only_keys(m);
  }
}

}  // namespace autoloco
