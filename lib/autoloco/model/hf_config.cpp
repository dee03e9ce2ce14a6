// config.json as transformers' GPT2Config, LlamaConfig, MistralConfig, Qwen2Config and
// Qwen3Config read it (field names and meanings from their documentation), written with every
// field that changes the computation.
#include "autoloco/model/hf_config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <vector>

#include "autoloco/model/hf_names.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {
namespace {

void add_tokens(JsonObject& out, const HfSpecialTokens& tokens) {
  if (tokens.bos) out.add("bos_token_id", *tokens.bos);
  if (tokens.eos) out.add("eos_token_id", *tokens.eos);
}

// config.json names a token the run does not have as null: left out, transformers would take its
// config class's default (GPT-2's 50256, Llama's 1 and 2), an id outside a small vocabulary (it
// warns) or a byte that means nothing special.
void add_config_tokens(JsonObject& out, const HfSpecialTokens& tokens) {
  if (tokens.bos) {
    out.add("bos_token_id", *tokens.bos);
  } else {
    out.add_null("bos_token_id");
  }
  if (tokens.eos) {
    out.add("eos_token_id", *tokens.eos);
  } else {
    out.add_null("eos_token_id");
  }
}

void add_gpt2(JsonObject& out, const ModelConfig& m) {
  out.add("model_type", "gpt2")
      .add("vocab_size", m.vocab_size)
      .add("n_positions", m.seq_len)
      .add("n_embd", m.d_model)
      .add("n_layer", m.n_layer)
      .add("n_head", m.n_head)
      .add_null("n_inner")
      .add("activation_function", "gelu_new")
      .add("layer_norm_epsilon", m.norm_eps)
      .add("resid_pdrop", 0.0)
      .add("embd_pdrop", 0.0)
      .add("attn_pdrop", 0.0)
      .add("scale_attn_weights", true)
      .add("scale_attn_by_inverse_layer_idx", false)
      .add("reorder_and_upcast_attn", false);
}

// transformers 4.x's form (rope_scaling beside rope_theta), which 5.x reads too.
void add_rope_scaling(JsonObject& out, const ModelConfig& m) {
  if (m.rope_scaling == "none") {
    out.add_null("rope_scaling");
    return;
  }
  JsonObject r;
  r.add("rope_type", m.rope_scaling).add("factor", m.rope_factor);
  if (m.rope_scaling == "llama3") {
    r.add("low_freq_factor", m.rope_low_freq_factor)
        .add("high_freq_factor", m.rope_high_freq_factor)
        .add("original_max_position_embeddings", m.rope_original_seq_len);
  }
  out.add("rope_scaling", r);
}

void add_llama(JsonObject& out, const ModelConfig& m) {
  const std::string type = hf_model_type(m);
  out.add("model_type", type)
      .add("vocab_size", m.vocab_size)
      .add("hidden_size", m.d_model)
      .add("intermediate_size", llama_ffn_hidden(m))
      .add("num_hidden_layers", m.n_layer)
      .add("num_attention_heads", m.n_head)
      .add("num_key_value_heads", kv_heads(m))
      .add("head_dim", attention_head_dim(m))
      .add("hidden_act", "silu")
      .add("max_position_embeddings", m.seq_len)
      .add("rms_norm_eps", m.norm_eps)
      .add("rope_theta", m.rope_theta);
  add_rope_scaling(out, m);
  // Qwen2's q/k/v biases are not a field: its class always has them (validate.cpp).
  if (type == "llama" || type == "qwen3") out.add("attention_bias", m.attention_bias);
  if (type == "llama") out.add("mlp_bias", false).add("pretraining_tp", 1);
  if (type == "mistral") out.add_null("sliding_window");
  if (type == "qwen2" || type == "qwen3") {
    out.add("use_sliding_window", false)
        .add_null("sliding_window")
        .add("max_window_layers", m.n_layer);
  }
  out.add("attention_dropout", 0.0);
}

// config.json's fields, read with the file named in every error.
class Fields {
 public:
  explicit Fields(const std::string& dir) : path_(dir + "/config.json") {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path_, ec)) {
      throw ConfigError(fmt::format(
          "model.init_from: '{}' has no config.json: name a Hugging Face model directory "
          "(config.json and model.safetensors, as save_pretrained writes them)",
          dir));
    }
    const std::optional<std::string> text = read_file_bytes(path_);
    if (!text) throw ConfigError(fmt::format("{}: cannot be read", path_));
    try {
      root_ = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      throw ConfigError(fmt::format("{}: not valid JSON: {}", path_, e.what()));
    }
    if (!root_.IsMap()) throw ConfigError(fmt::format("{}: not a JSON object", path_));
  }

  bool has(const char* key) const { return root_[key] && !root_[key].IsNull(); }

  template <class T>
  T get(const char* key) const {
    if (!has(key)) throw ConfigError(fmt::format("{}: field '{}' is missing", path_, key));
    return as<T>(key);
  }

  template <class T>
  T get(const char* key, T fallback) const {
    return has(key) ? as<T>(key) : fallback;
  }

  // Refuses a field whose value would change the computation into one we do not have.
  void require(bool ok, const char* key, const std::string& what) const {
    if (!ok) {
      throw ConfigError(fmt::format("{}: {} is not supported ({}): autoloco's {} does not have it",
                                    path_, key, what, get<std::string>("model_type")));
    }
  }

  const std::string& path() const { return path_; }
  YAML::Node node(const char* key) const { return root_[key]; }

 private:
  template <class T>
  T as(const char* key) const {
    try {
      return root_[key].as<T>();
    } catch (const YAML::Exception&) {
      throw ConfigError(fmt::format("{}: field '{}' has the wrong type", path_, key));
    }
  }

  std::string path_;
  YAML::Node root_;
};

ModelConfig read_gpt2(const Fields& f) {
  ModelConfig m;
  m.arch = "gpt2";
  m.vocab_size = f.get<int64_t>("vocab_size");
  m.seq_len = f.get<int64_t>("n_positions");
  m.d_model = f.get<int64_t>("n_embd");
  m.n_layer = f.get<int64_t>("n_layer");
  m.n_head = f.get<int64_t>("n_head");
  m.norm_eps = f.get<double>("layer_norm_epsilon", 1e-5);
  m.tie_embeddings = f.get<bool>("tie_word_embeddings", true);
  const std::string act = f.get<std::string>("activation_function", "gelu_new");
  f.require(act == "gelu_new" || act == "gelu_pytorch_tanh", "activation_function", act);
  f.require(f.get<int64_t>("n_inner", 4 * m.d_model) == 4 * m.d_model, "n_inner",
            "an MLP width other than 4 n_embd");
  f.require(!f.get<bool>("scale_attn_by_inverse_layer_idx", false),
            "scale_attn_by_inverse_layer_idx", "true");
  f.require(f.get<bool>("scale_attn_weights", true), "scale_attn_weights", "false");
  return m;
}

// rope_scaling (transformers 4.x) or rope_parameters (5.x) into the model.rope_* keys.
void read_rope(const Fields& f, ModelConfig& m) {
  m.rope_theta = f.get<double>("rope_theta", 10000.0);
  const YAML::Node parameters = f.node("rope_parameters");
  const bool five = parameters && parameters.IsMap();
  const YAML::Node r = five ? parameters : f.node("rope_scaling");
  const char* key = five ? "rope_parameters" : "rope_scaling";
  if (!(r && r.IsMap())) return;
  if (r["rope_theta"]) m.rope_theta = r["rope_theta"].as<double>();
  if (r["partial_rotary_factor"]) {
    const double partial = r["partial_rotary_factor"].as<double>();
    f.require(partial == 1.0, key, fmt::format("partial_rotary_factor {}", partial));
  }
  const YAML::Node type_node = r["rope_type"] ? r["rope_type"] : r["type"];
  const std::string type = type_node ? type_node.as<std::string>() : std::string("default");
  if (type == "default") return;
  f.require(type == "linear" || type == "llama3", key,
            fmt::format("rope_type {}: autoloco has default, linear and llama3", type));
  const auto number = [&](const char* name) {
    if (!r[name]) {
      throw ConfigError(
          fmt::format("{}: {}.{} is missing (rope_type {})", f.path(), key, name, type));
    }
    return r[name].as<double>();
  };
  m.rope_scaling = type;
  m.rope_factor = number("factor");
  if (type == "llama3") {
    m.rope_low_freq_factor = number("low_freq_factor");
    m.rope_high_freq_factor = number("high_freq_factor");
    m.rope_original_seq_len = static_cast<int64_t>(number("original_max_position_embeddings"));
  }
}

// Every model_type of the Llama family autoloco builds: llama, mistral, qwen2, qwen3.
ModelConfig read_llama(const Fields& f, const std::string& type) {
  ModelConfig m;
  m.arch = "llama";
  m.family = type;
  m.vocab_size = f.get<int64_t>("vocab_size");
  m.d_model = f.get<int64_t>("hidden_size");
  m.ffn_hidden = f.get<int64_t>("intermediate_size");
  m.n_layer = f.get<int64_t>("num_hidden_layers");
  m.n_head = f.get<int64_t>("num_attention_heads");
  m.n_kv_head = f.get<int64_t>("num_key_value_heads", m.n_head);
  m.seq_len = f.get<int64_t>("max_position_embeddings");
  m.norm_eps = f.get<double>("rms_norm_eps", 1e-6);
  m.tie_embeddings = f.get<bool>("tie_word_embeddings", false);
  read_rope(f, m);
  f.require(m.n_head > 0, "num_attention_heads", "0");
  const int64_t head = f.get<int64_t>("head_dim", m.d_model / m.n_head);
  if (head != m.d_model / m.n_head || m.d_model % m.n_head != 0) m.head_dim = head;
  f.require(f.get<std::string>("hidden_act", "silu") == "silu", "hidden_act",
            f.get<std::string>("hidden_act", "silu"));
  // Qwen2's class always has q/k/v biases, Mistral's never; Llama's and Qwen3's say.
  m.attention_bias = type == "qwen2" ||
                     ((type == "llama" || type == "qwen3") && f.get<bool>("attention_bias", false));
  m.qk_norm = type == "qwen3";
  f.require(!f.get<bool>("mlp_bias", false), "mlp_bias", "true");
  f.require(f.get<int64_t>("pretraining_tp", 1) == 1, "pretraining_tp", "other than 1");
  const double dropout = f.get<double>("attention_dropout", 0.0);
  f.require(dropout == 0.0, "attention_dropout",
            fmt::format("{}: autoloco trains without dropout", dropout));
  f.require(!f.get<bool>("use_mrope", false), "use_mrope", "true: multimodal rotary positions");
  const double partial = f.get<double>("partial_rotary_factor", 1.0);
  f.require(partial == 1.0, "partial_rotary_factor",
            fmt::format("{}: rotation of part of each head", partial));
  // transformers >= 4.56 lists each layer's attention; a window in any one is not built.
  if (const YAML::Node layers = f.node("layer_types"); layers && layers.IsSequence()) {
    for (const YAML::Node& layer : layers) {
      const std::string kind = layer.as<std::string>();
      f.require(kind == "full_attention", "layer_types", kind);
    }
  }
  if (type == "qwen2" || type == "qwen3") {
    f.require(!f.get<bool>("use_sliding_window", false), "use_sliding_window",
              "true: attention over a window");
  } else if (f.has("sliding_window")) {
    // A window no shorter than the context changes nothing.
    const int64_t window = f.get<int64_t>("sliding_window");
    f.require(window >= m.seq_len, "sliding_window",
              fmt::format("{}, shorter than max_position_embeddings {}: attention over a window",
                          window, m.seq_len));
  }
  return m;
}

struct Difference {
  const char* key;
  std::string run;
  std::string hf;
};

std::vector<Difference> differences(const ModelConfig& run, const ModelConfig& hf) {
  std::vector<Difference> out;
  const auto compare = [&](const char* key, const auto& a, const auto& b) {
    if (a != b) out.push_back({key, fmt::format("{}", a), fmt::format("{}", b)});
  };
  compare("model.arch", run.arch, hf.arch);
  if (!out.empty()) return out;  // the rest compares fields of one architecture
  compare("model.n_layer", run.n_layer, hf.n_layer);
  compare("model.n_head", run.n_head, hf.n_head);
  compare("model.d_model", run.d_model, hf.d_model);
  compare("model.vocab_size", run.vocab_size, hf.vocab_size);
  compare("model.tie_embeddings", run.tie_embeddings, hf.tie_embeddings);
  compare("model.norm_eps", run.norm_eps, hf.norm_eps);
  if (run.arch == "llama") {
    compare("model.n_kv_head", kv_heads(run), kv_heads(hf));
    compare("model.head_dim", attention_head_dim(run), attention_head_dim(hf));
    compare("model.ffn_hidden", llama_ffn_hidden(run), llama_ffn_hidden(hf));
    compare("model.attention_bias", run.attention_bias, hf.attention_bias);
    compare("model.qk_norm", run.qk_norm, hf.qk_norm);
    compare("model.rope_theta", run.rope_theta, hf.rope_theta);
    compare("model.rope_scaling", run.rope_scaling, hf.rope_scaling);
    if (run.rope_scaling == hf.rope_scaling && run.rope_scaling != "none") {
      compare("model.rope_factor", run.rope_factor, hf.rope_factor);
    }
    if (run.rope_scaling == "llama3" && hf.rope_scaling == "llama3") {
      compare("model.rope_low_freq_factor", run.rope_low_freq_factor, hf.rope_low_freq_factor);
      compare("model.rope_high_freq_factor", run.rope_high_freq_factor, hf.rope_high_freq_factor);
      compare("model.rope_original_seq_len", run.rope_original_seq_len, hf.rope_original_seq_len);
    }
    if (run.seq_len > hf.seq_len) compare("model.seq_len", run.seq_len, hf.seq_len);
  } else {
    compare("model.seq_len", run.seq_len, hf.seq_len);
  }
  return out;
}

}  // namespace

std::string hf_config_json(const ModelConfig& model, const HfSpecialTokens& tokens) {
  JsonObject out;
  out.add("architectures", std::vector<std::string>{hf_architecture(model)});
  if (model.arch == "llama") {
    add_llama(out, model);
  } else {
    add_gpt2(out, model);
  }
  out.add("initializer_range", 0.02)
      .add("tie_word_embeddings", model.tie_embeddings)
      .add("use_cache", true)
      .add("torch_dtype", "float32");
  add_config_tokens(out, tokens);
  return out.pretty();
}

std::string hf_generation_config_json(const HfSpecialTokens& tokens) {
  JsonObject out;
  add_tokens(out, tokens);
  out.add("do_sample", false);
  return out.pretty();
}

ModelConfig read_hf_config(const std::string& dir) {
  const Fields f(dir);
  const std::string type = f.get<std::string>("model_type");
  if (type == "gpt2") return read_gpt2(f);
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3") {
    return read_llama(f, type);
  }
  throw ConfigError(
      fmt::format("{}: model_type '{}' is not an architecture autoloco has (gpt2, llama, "
                  "mistral, qwen2, qwen3)",
                  f.path(), type));
}

void check_hf_config(const ModelConfig& run, const ModelConfig& hf, const std::string& dir) {
  const std::vector<Difference> diff = differences(run, hf);
  if (diff.empty()) return;
  std::string lines;
  for (const Difference& d : diff)
    lines += fmt::format("\n  {}: this run has {}, {}/config.json has {}", d.key, d.run, dir, d.hf);
  throw ConfigError(fmt::format(
      "model.init_from: '{}' holds another model than this run's model keys describe:{}\nset "
      "these keys to the directory's values (model.preset and the other keys), or start from "
      "another directory",
      dir, lines));
}

}  // namespace autoloco
