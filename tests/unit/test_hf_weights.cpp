// Unit tests of the Hugging Face interchange (model/hf_*.hpp): names and layouts per
// architecture, config.json written and read back, the check that refuses another model, and
// export then import giving back every parameter bitwise. tests/hf/check_hf.py checks the same
// files against transformers itself.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/temp_dir.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/model/hf_config.hpp"
#include "autoloco/model/hf_names.hpp"
#include "autoloco/model/hf_tokenizer_files.hpp"
#include "autoloco/model/hf_weights.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/train/init_tokenizer.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/error.hpp"

using autoloco::ModelConfig;

namespace {

ModelConfig small(const std::string& arch, bool tied, int64_t kv_heads = 0) {
  ModelConfig c;
  c.arch = arch;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = kv_heads;
  c.d_model = 32;
  c.seq_len = 16;
  c.vocab_size = 40;
  c.tie_embeddings = tied;
  if (arch == "llama") c.multiple_of = 16;
  return c;
}

autoloco::NamedTensors parameters_of(autoloco::Decoder& model) {
  autoloco::NamedTensors out;
  for (const auto& item : model->named_parameters())
    out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

}  // namespace

TEST_CASE("HF names follow GPT2LMHeadModel and LlamaForCausalLM", "[hf]") {
  const auto gpt2 = autoloco::hf_params(small("gpt2", false));
  CHECK(gpt2.front().hf == "transformer.wte.weight");
  CHECK(gpt2[2].hf == "transformer.h.0.ln_1.weight");
  CHECK(gpt2[4].ours == "blocks.0.attn.qkv.weight");
  CHECK(gpt2[4].hf == "transformer.h.0.attn.c_attn.weight");
  CHECK(gpt2[4].transposed);
  CHECK_FALSE(gpt2[5].transposed);  // the bias
  CHECK(gpt2.back().hf == "lm_head.weight");
  CHECK_FALSE(gpt2.back().transposed);
  const auto llama = autoloco::hf_params(small("llama", true, 2));
  CHECK(llama.front().hf == "model.embed_tokens.weight");
  CHECK(llama[2].hf == "model.layers.0.self_attn.q_proj.weight");
  CHECK(llama.back().hf == "model.norm.weight");  // tied: no lm_head
  for (const auto& p : llama)
    CHECK_FALSE(p.transposed);
}

TEST_CASE("config.json reads back as the model keys it was written from", "[hf]") {
  for (const ModelConfig& c : {small("gpt2", true), small("gpt2", false), small("llama", false, 2),
                               small("llama", true)}) {
    INFO(c.arch << " tied " << c.tie_embeddings);
    autoloco::test::TempDir dir("hf-config");
    std::ofstream(dir.path / "config.json") << autoloco::hf_config_json(c, {});
    const ModelConfig back = autoloco::read_hf_config(dir.path.string());
    CHECK_NOTHROW(autoloco::check_hf_config(c, back, dir.path.string()));
    CHECK(back.arch == c.arch);
    CHECK(back.tie_embeddings == c.tie_embeddings);
  }
}

TEST_CASE("config.json of Mistral, Qwen2, Qwen3 and Llama 3.1 reads back as the model keys",
          "[hf]") {
  ModelConfig mistral = small("llama", false, 2);
  mistral.family = "mistral";
  ModelConfig qwen2 = small("llama", true, 2);
  qwen2.attention_bias = true;
  ModelConfig qwen3 = small("llama", true, 2);
  qwen3.qk_norm = true;
  qwen3.head_dim = 16;
  ModelConfig llama31 = small("llama", false);
  llama31.rope_scaling = "llama3";
  llama31.rope_factor = 8.0;
  llama31.rope_original_seq_len = 4;
  const std::vector<std::pair<ModelConfig, std::string>> cases = {{mistral, "MistralForCausalLM"},
                                                                  {qwen2, "Qwen2ForCausalLM"},
                                                                  {qwen3, "Qwen3ForCausalLM"},
                                                                  {llama31, "LlamaForCausalLM"}};
  for (const auto& [c, architecture] : cases) {
    INFO(architecture);
    autoloco::test::TempDir dir("hf-family");
    const std::string json = autoloco::hf_config_json(c, {});
    CHECK_THAT(json, Catch::Contains(architecture));
    std::ofstream(dir.path / "config.json") << json;
    const ModelConfig back = autoloco::read_hf_config(dir.path.string());
    CHECK_NOTHROW(autoloco::check_hf_config(c, back, dir.path.string()));
    CHECK(autoloco::hf_model_type(back) == autoloco::hf_model_type(c));
    CHECK(back.attention_bias == c.attention_bias);
    CHECK(back.qk_norm == c.qk_norm);
    CHECK(autoloco::attention_head_dim(back) == autoloco::attention_head_dim(c));
    CHECK(back.rope_scaling == c.rope_scaling);
    CHECK(back.rope_original_seq_len == c.rope_original_seq_len);
  }
  // Qwen3's norms and head width reach the names and shapes of its parameters.
  const auto names = autoloco::hf_params(qwen3);
  CHECK(std::any_of(names.begin(), names.end(), [](const autoloco::HfParam& p) {
    return p.hf == "model.layers.1.self_attn.k_norm.weight" && p.shape == std::vector<int64_t>{16};
  }));
}

TEST_CASE("a directory of another model is refused naming each key and both values", "[hf]") {
  autoloco::test::TempDir dir("hf-other");
  const ModelConfig hf = small("llama", false, 2);
  std::ofstream(dir.path / "config.json") << autoloco::hf_config_json(hf, {});
  ModelConfig run = hf;
  run.n_layer = 3;
  run.n_kv_head = 4;
  const auto read = autoloco::read_hf_config(dir.path.string());
  CHECK_THROWS_WITH(autoloco::check_hf_config(run, read, dir.path.string()),
                    Catch::Contains("model.n_layer: this run has 3") &&
                        Catch::Contains("config.json has 2") &&
                        Catch::Contains("model.n_kv_head: this run has 4"));
  run = hf;
  run.arch = "gpt2";
  CHECK_THROWS_WITH(autoloco::check_hf_config(run, read, dir.path.string()),
                    Catch::Contains("model.arch: this run has gpt2"));
  // A shorter context than the directory's is fine for llama.
  run = hf;
  run.seq_len = 8;
  CHECK_NOTHROW(autoloco::check_hf_config(run, read, dir.path.string()));
}

TEST_CASE("config.json with features autoloco lacks is refused, naming the field", "[hf]") {
  autoloco::test::TempDir dir("hf-unsupported");
  std::ofstream(dir.path / "config.json")
      << R"({"model_type": "llama", "vocab_size": 40, "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 16,
             "rope_scaling": {"rope_type": "llama3", "factor": 32.0}})";
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("rope_scaling.low_freq_factor is missing"));
  const auto write = [&](const std::string& json) {
    std::filesystem::remove(dir.path / "config.json");
    std::ofstream(dir.path / "config.json") << json;
  };
  const std::string sizes =
      R"("vocab_size": 40, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "max_position_embeddings": 16)";
  write(R"({"model_type": "llama", )" + sizes +
        R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("rope_scaling") && Catch::Contains("yarn"));
  write(R"({"model_type": "mistral", )" + sizes + R"(, "sliding_window": 8})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("sliding_window") && Catch::Contains("8"));
  write(R"({"model_type": "qwen2", )" + sizes + R"(, "use_sliding_window": true})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("use_sliding_window"));
  // The fields a Llama-family config may carry that change the forward pass.
  write(R"({"model_type": "qwen3", )" + sizes + R"(, "attention_dropout": 0.1})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("attention_dropout") && Catch::Contains("0.1"));
  write(R"({"model_type": "qwen2", )" + sizes + R"(, "use_mrope": true})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()), Catch::Contains("use_mrope"));
  write(R"({"model_type": "llama", )" + sizes + R"(, "partial_rotary_factor": 0.5})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("partial_rotary_factor") && Catch::Contains("0.5"));
  write(
      R"({"model_type": "llama", )" + sizes +
      R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25}})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("partial_rotary_factor 0.25"));
  write(R"({"model_type": "qwen3", )" + sizes +
        R"(, "layer_types": ["full_attention", "sliding_attention"]})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("layer_types") && Catch::Contains("sliding_attention"));
  // All full attention, as transformers writes for Qwen3 today: read.
  write(R"({"model_type": "qwen3", )" + sizes +
        R"(, "layer_types": ["full_attention", "full_attention"], "attention_dropout": 0.0})");
  CHECK_NOTHROW(autoloco::read_hf_config(dir.path.string()));
  write(R"({"model_type": "gemma"})");
  CHECK_THROWS_WITH(autoloco::read_hf_config(dir.path.string()),
                    Catch::Contains("gemma") && Catch::Contains("qwen3"));
  CHECK_THROWS_WITH(autoloco::read_hf_config((dir.path / "none").string()),
                    Catch::Contains("no config.json"));
}

TEST_CASE("export then import gives back every parameter bitwise, sharded or not", "[hf]") {
  for (const ModelConfig& c : {small("gpt2", true), small("gpt2", false), small("llama", false, 2),
                               small("llama", true)}) {
    for (const uint64_t shard : {autoloco::kHfMaxShardBytes, uint64_t{20'000}}) {
      INFO(c.arch << " tied " << c.tie_embeddings << " shard " << shard);
      torch::manual_seed(11);
      auto model = autoloco::make_decoder(c);
      const auto ours = parameters_of(model);
      autoloco::test::TempDir dir("hf-roundtrip");
      const std::string out = (dir.path / "model").string();
      autoloco::HfExport options;
      options.max_shard_bytes = shard;
      const auto files = autoloco::export_hf(out, c, ours, options);
      CHECK(std::filesystem::exists(out + "/config.json"));
      CHECK(std::filesystem::exists(out + "/model.safetensors.index.json") ==
            (shard < autoloco::kHfMaxShardBytes));
      const auto back = autoloco::import_hf(out, c);
      REQUIRE(back.size() == ours.size());
      for (size_t i = 0; i < ours.size(); ++i) {
        INFO(ours[i].first);
        CHECK(back[i].first == ours[i].first);
        CHECK(torch::equal(back[i].second, ours[i].second));
      }
      auto other = autoloco::make_decoder(c);
      autoloco::load_parameters(*other, back);
      const auto idx = torch::randint(0, c.vocab_size, {2, 8}, torch::kLong);
      CHECK(torch::equal(other->forward(idx), model->forward(idx)));
      // A second export into the same directory writes nothing.
      CHECK_THROWS_WITH(autoloco::export_hf(out, c, ours, options), Catch::Contains("exists"));
    }
  }
}

TEST_CASE("model.init_from describes the model: the keys the run leaves unset come from it",
          "[hf][config]") {
  autoloco::test::TempDir dir("hf-describe");
  ModelConfig qwen3 = small("llama", true, 2);
  qwen3.qk_norm = true;
  qwen3.head_dim = 16;
  qwen3.norm_eps = 1e-6;
  qwen3.rope_theta = 1e6;
  qwen3.seq_len = 4096;
  std::ofstream(dir.path / "config.json") << autoloco::hf_config_json(qwen3, {});
  const std::string at = "model.init_from=" + dir.path.string();
  const autoloco::ModelDescriber describe = autoloco::read_hf_config;
  // Only init_from and the context: every other model key is the directory's, the context the
  // run's (the directory's 4096 is the released maximum).
  const ModelConfig m =
      autoloco::parse_config("", {at, "model.seq_len=8"}, "<test>", describe).model;
  CHECK(m.arch == "llama");
  CHECK(m.n_layer == 2);
  CHECK(m.n_kv_head == 2);
  CHECK(m.qk_norm);
  CHECK(autoloco::attention_head_dim(m) == 16);
  CHECK(m.norm_eps == 1e-6);
  CHECK(m.rope_theta == 1e6);
  CHECK(m.tie_embeddings);
  CHECK(autoloco::hf_model_type(m) == "qwen3");
  CHECK(m.seq_len == 8);
  CHECK_NOTHROW(autoloco::check_hf_config(m, qwen3, dir.path.string()));
  // The start log names the keys the directory gave: not those the run gave.
  const auto& d = m.described;
  CHECK(std::find(d.begin(), d.end(), "model.n_layer") != d.end());
  CHECK(std::find(d.begin(), d.end(), "model.qk_norm") != d.end());
  CHECK(std::find(d.begin(), d.end(), "model.seq_len") == d.end());
  CHECK(std::find(d.begin(), d.end(), "model.init_from") == d.end());
  // A key the run sets to another value stays the run's, and the check names both values.
  const ModelConfig other =
      autoloco::parse_config("", {at, "model.seq_len=8", "model.n_layer=3"}, "<test>", describe)
          .model;
  CHECK(other.n_layer == 3);
  CHECK(std::find(other.described.begin(), other.described.end(), "model.n_layer") ==
        other.described.end());
  CHECK_THROWS_WITH(autoloco::check_hf_config(other, qwen3, dir.path.string()),
                    Catch::Contains("model.n_layer: this run has 3"));
  // Without the describer (a config read back from a checkpoint) nothing is filled.
  CHECK(autoloco::parse_config("", {at}).model.arch == "gpt2");
  // A missing directory is named.
  CHECK_THROWS_WITH(
      autoloco::parse_config("", {"model.init_from=/nonexistent/x"}, "<test>", describe),
      Catch::Contains("model.init_from") && Catch::Contains("no config.json"));
}

TEST_CASE("model.init_from's tokenizer must be the one the data was prepared with", "[hf][data]") {
  autoloco::test::TempDir dir("hf-init-tokenizer");
  const std::string model_dir = dir.path.string();
  const std::string json = R"({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}})";
  std::ofstream(dir.path / "tokenizer.json") << json;
  autoloco::PreparedData hf;
  hf.json_path = "data/x/prepare.json";
  hf.tokenizer = "hf";
  hf.vocab_size = 1;
  hf.tokenizer_model = "data/x/tokenizer.json";
  hf.tokenizer_model_crc32 = autoloco::crc32(json.data(), json.size());
  CHECK_NOTHROW(autoloco::check_init_from_tokenizer(hf, model_dir));
  // Another tokenizer.json: named, with the command that prepares the corpus with the model's.
  hf.tokenizer_model_crc32 ^= 1;
  CHECK_THROWS_WITH(autoloco::check_init_from_tokenizer(hf, model_dir),
                    Catch::Contains("another tokenizer than model.init_from's") &&
                        Catch::Contains(model_dir + "/tokenizer.json") &&
                        Catch::Contains("--hf-tokenizer " + model_dir + "/tokenizer.json"));
  // Byte data: right against autoloco's byte-level export, wrong against a subword tokenizer.
  autoloco::PreparedData bytes;
  bytes.json_path = "data/b/prepare.json";
  bytes.tokenizer = "bytes";
  bytes.vocab_size = 256;
  CHECK_THROWS_WITH(autoloco::check_init_from_tokenizer(bytes, model_dir),
                    Catch::Contains("bytes tokenizer of vocabulary 256"));
  std::ofstream(dir.path / "tokenizer.json", std::ios::trunc)
      << autoloco::byte_level_tokenizer_json();
  CHECK_NOTHROW(autoloco::check_init_from_tokenizer(bytes, model_dir));
  // Nothing to compare: shards without prepare.json, a directory without a tokenizer.
  CHECK_NOTHROW(autoloco::check_init_from_tokenizer(std::nullopt, model_dir));
  std::filesystem::remove(dir.path / "tokenizer.json");
  CHECK_NOTHROW(autoloco::check_init_from_tokenizer(hf, model_dir));
}
