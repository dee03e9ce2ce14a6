// Unit tests of the architectures behind the Decoder interface: the parameter specs against the
// built modules, the presets' published counts (counted from the specs, nothing allocated),
// the Llama block's pieces (RMSNorm, rotary embeddings, grouped-query attention), causality and
// a double-precision finite-difference check of the Llama gradients; and the model keys'
// config rules (presets and their overrides, the head's default, llama-only keys).
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "../support/finite_difference.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/config/model_presets.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/model/llama.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/util/error.hpp"

using autoloco::ModelConfig;

namespace {

ModelConfig tiny_llama(int64_t kv_heads = 2, bool tied = false) {
  ModelConfig c;
  c.arch = "llama";
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = kv_heads;
  c.d_model = 32;
  c.seq_len = 8;
  c.vocab_size = 13;
  c.multiple_of = 16;
  c.tie_embeddings = tied;
  return c;
}

ModelConfig preset(const std::string& name) {
  ModelConfig c;
  autoloco::apply_model_preset(name, c);
  return c;
}

torch::Tensor param(autoloco::Decoder& model, const std::string& name) {
  const auto params = model->named_parameters();
  const auto* p = params.find(name);
  REQUIRE(p != nullptr);
  return *p;
}

torch::Tensor random_tokens(const ModelConfig& c, int64_t batch, int64_t t) {
  return torch::randint(0, c.vocab_size, {batch, t}, torch::kLong);
}

}  // namespace

TEST_CASE("the built models have exactly the parameters their specs list, in order", "[model]") {
  ModelConfig gpt_untied;
  gpt_untied.tie_embeddings = false;
  // Qwen2's q/k/v biases, Qwen3's head width and query/key norms.
  ModelConfig qwen = tiny_llama(2, true);
  qwen.attention_bias = true;
  qwen.head_dim = 16;
  qwen.qk_norm = true;
  const std::vector<ModelConfig> configs = {ModelConfig{},        gpt_untied,
                                            tiny_llama(2, false), tiny_llama(4, true),
                                            tiny_llama(1, false), qwen};
  for (const ModelConfig& c : configs) {
    INFO(c.arch << " kv " << c.n_kv_head << " tied " << c.tie_embeddings);
    auto model = autoloco::make_decoder(c);
    const auto specs = autoloco::parameter_specs(c);
    const auto params = model->named_parameters();
    REQUIRE(params.size() == specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      INFO(specs[i].name);
      CHECK(params[i].key() == specs[i].name);
      CHECK(params[i].value().sizes().vec() == specs[i].shape);
    }
    CHECK(autoloco::parameter_count(*model) == autoloco::parameter_count(c));
  }
}

TEST_CASE("the presets' parameter counts equal the published ones", "[model]") {
  // Radford et al. 2019 / Hugging Face gpt2*; Meta's model cards (Llama 2 7B, Llama 3 8B,
  // Llama 3.1 8B, Llama 3.2 1B and 3B); what transformers counts for Qwen2.5 0.5B, Qwen3 0.6B,
  // SmolLM2 135M and Mistral 7B v0.3 from their released config.json.
  const std::vector<std::pair<std::string, int64_t>> published = {
      {"gpt2", 124'439'808},
      {"gpt2-medium", 354'823'168},
      {"gpt2-large", 774'030'080},
      {"gpt2-xl", 1'557'611'200},
      {"llama-3.2-1b", 1'235'814'400},
      {"llama-3.2-3b", 3'212'749'824},
      {"llama-3-8b", 8'030'261'248},
      {"llama-3.1-8b", 8'030'261'248},
      {"llama-2-7b", 6'738'415'616},
      {"qwen2.5-0.5b", 494'032'768},
      {"qwen3-0.6b", 596'049'920},
      {"smollm2-135m", 134'515'008},
      {"mistral-7b-v0.3", 7'248'023'552},
  };
  for (const auto& [name, count] : published) {
    INFO(name);
    CHECK(autoloco::parameter_count(preset(name)) == count);
  }
  CHECK(autoloco::llama_ffn_hidden(preset("llama-3-8b")) == 14336);
  CHECK(autoloco::llama_ffn_hidden(preset("llama-2-7b")) == 11008);
  CHECK(autoloco::llama_ffn_hidden(preset("llama-3.2-1b")) == 8192);
  CHECK(autoloco::kv_heads(preset("llama-3-8b")) == 8);
  CHECK_FALSE(preset("llama-3-8b").tie_embeddings);
  CHECK(preset("llama-3.2-1b").tie_embeddings);
  // The CPU ones are a few million parameters and train on the byte corpus.
  for (const char* name : {"llama-tiny", "llama-small"}) {
    INFO(name);
    const ModelConfig c = preset(name);
    CHECK(c.vocab_size == 256);
    CHECK(autoloco::parameter_count(c) > 1'000'000);
    CHECK(autoloco::parameter_count(c) < 20'000'000);
    CHECK(autoloco::parameter_count(*autoloco::make_decoder(c)) == autoloco::parameter_count(c));
  }
}

TEST_CASE("llama FLOPs per token leave the embedding out and count the head's matmul", "[model]") {
  const ModelConfig c = tiny_llama(2, false);
  const double d = 32, L = 2, T = 8, V = 13;
  const double kv = 2 * 8;  // two key/value heads of width 8
  const auto h = static_cast<double>(autoloco::llama_ffn_hidden(c));
  CHECK(h == 96);  // 4 * 32 = 128, 2/3 of it 85, rounded up to a multiple of 16
  const double block = 2 * d + d * d + 2 * kv * d + d * d + 3 * h * d;
  const double n = L * block + d;
  CHECK(autoloco::non_embedding_parameter_count(c) == static_cast<int64_t>(n));
  CHECK(autoloco::flops_per_token(c) == Approx(6 * n + 12 * L * d * T + 6 * d * V));
}

TEST_CASE("RMSNorm divides by the root mean square and scales by its weight", "[model][llama]") {
  autoloco::RMSNorm norm(4, 1e-5);
  {
    torch::NoGradGuard no_grad;
    norm->weight.copy_(torch::tensor({1.0F, 2.0F, 0.5F, -1.0F}));
  }
  const auto x = torch::tensor({{3.0F, -4.0F, 0.0F, 0.0F}});  // mean square 25/4
  const auto y = norm->forward(x);
  const double rms = std::sqrt(25.0 / 4.0 + 1e-5);
  CHECK(y[0][0].item<double>() == Approx(3.0 / rms));
  CHECK(y[0][1].item<double>() == Approx(-8.0 / rms));
  CHECK(y[0][3].item<double>() == 0.0);
}

TEST_CASE("rotary embeddings turn pairs of halves and keep only relative positions",
          "[model][llama]") {
  const int64_t D = 8;
  ModelConfig c;
  c.rope_theta = 10000.0;
  const auto rope =
      autoloco::rotary_tables(16, autoloco::rope_inverse_frequencies(c, D, torch::kCPU));
  REQUIRE(rope.cos.sizes() == torch::IntArrayRef({16, D}));
  // Position 0 is the identity; the first frequency is 1 rad per position.
  CHECK(torch::allclose(rope.cos[0], torch::ones({D})));
  CHECK(rope.cos[3][0].item<double>() == Approx(std::cos(3.0)));
  CHECK(rope.sin[3][D / 2].item<double>() == Approx(std::sin(3.0)));
  CHECK(rope.cos[5][1].item<double>() == Approx(std::cos(5.0 / std::pow(10000.0, 2.0 / D))));
  // q.k after rotation depends on the positions' difference only, and norms are kept.
  torch::manual_seed(7);
  const auto q = torch::randn({1, 1, 1, D}).expand({1, 1, 16, D}).contiguous();
  const auto k = torch::randn({1, 1, 1, D}).expand({1, 1, 16, D}).contiguous();
  const auto rq = autoloco::apply_rotary(q, rope);
  const auto rk = autoloco::apply_rotary(k, rope);
  const double d_3_1 = rq[0][0][3].dot(rk[0][0][1]).item<double>();
  const double d_9_7 = rq[0][0][9].dot(rk[0][0][7]).item<double>();
  CHECK(d_3_1 == Approx(d_9_7).epsilon(1e-4));
  CHECK(rq[0][0][11].norm().item<double>() == Approx(q[0][0][0].norm().item<double>()));
}

TEST_CASE("grouped-query attention equals full attention with the key/value heads repeated",
          "[model][llama]") {
  torch::manual_seed(8);
  const ModelConfig gqa = tiny_llama(2, false);
  ModelConfig full = gqa;
  full.n_kv_head = 4;
  auto a = autoloco::make_decoder(gqa);
  auto b = autoloco::make_decoder(full);
  {
    torch::NoGradGuard no_grad;
    const auto pa = a->named_parameters();
    for (auto& item : b->named_parameters()) {
      const auto& src = pa[item.key()];
      const bool kv = item.key().find("k_proj") != std::string::npos ||
                      item.key().find("v_proj") != std::string::npos;
      // Query heads 0, 1 read kv head 0; heads 2, 3 read kv head 1 (head width 8).
      item.value().copy_(kv ? src.view({2, 1, 8, 32}).expand({2, 2, 8, 32}).reshape({32, 32})
                            : src);
    }
  }
  const auto idx = random_tokens(gqa, 2, 8);
  CHECK(torch::allclose(a->forward(idx), b->forward(idx), 1e-5, 1e-6));
}

TEST_CASE("llama is causal, and its head is tied or its own", "[model][llama]") {
  torch::manual_seed(9);
  for (const bool tied : {false, true}) {
    const ModelConfig c = tiny_llama(2, tied);
    auto model = autoloco::make_decoder(c);
    const auto idx = random_tokens(c, 2, c.seq_len);
    auto changed = idx.clone();
    changed.select(1, 5).fill_((idx[0][5].item<int64_t>() + 1) % c.vocab_size);
    const auto x = model->forward(idx);
    const auto y = model->forward(changed);
    CHECK(torch::equal(x.narrow(1, 0, 5), y.narrow(1, 0, 5)));
    CHECK_FALSE(torch::allclose(x.select(1, 5), y.select(1, 5)));
    CHECK((model->named_parameters().find("lm_head.weight") == nullptr) == tied);
    CHECK(x.sizes() == torch::IntArrayRef({2, c.seq_len, c.vocab_size}));
  }
}

TEST_CASE("llama initialisation: N(0, 0.02), residual projections scaled by depth, norms 1",
          "[model][llama]") {
  torch::manual_seed(12);
  ModelConfig c = tiny_llama(2, false);
  c.n_layer = 4;
  c.d_model = 256;
  c.n_head = 8;
  c.vocab_size = 512;
  auto model = autoloco::make_decoder(c);
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  CHECK(param(model, "embed_tokens.weight").std().item<double>() == Approx(0.02).epsilon(0.02));
  CHECK(param(model, "blocks.1.self_attn.q_proj.weight").std().item<double>() ==
        Approx(0.02).epsilon(0.02));
  CHECK(param(model, "blocks.0.mlp.gate_proj.weight").std().item<double>() ==
        Approx(0.02).epsilon(0.02));
  CHECK(param(model, "lm_head.weight").std().item<double>() == Approx(0.02).epsilon(0.02));
  CHECK(param(model, "blocks.2.self_attn.o_proj.weight").std().item<double>() ==
        Approx(residual_std).epsilon(0.05));
  CHECK(param(model, "blocks.3.mlp.down_proj.weight").std().item<double>() ==
        Approx(residual_std).epsilon(0.03));
  CHECK(param(model, "norm.weight").eq(1.0).all().item<bool>());
  CHECK(param(model, "blocks.1.post_attention_layernorm.weight").eq(1.0).all().item<bool>());
}

TEST_CASE("llama gradients match central finite differences in double precision",
          "[model][llama]") {
  torch::manual_seed(10);
  const ModelConfig c = tiny_llama(2, false);
  auto model = autoloco::make_decoder(c);
  model->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters())
      p.add_(torch::randn_like(p) * 0.3);
  }
  const auto idx = random_tokens(c, 2, c.seq_len);
  const auto targets = random_tokens(c, 2, c.seq_len);
  auto objective = [&] { return autoloco::lm_loss(model->forward(idx), targets); };
  objective().backward();
  const std::vector<std::pair<std::string, int64_t>> entries = {
      {"embed_tokens.weight", 3 * 32 + 1},
      {"blocks.0.input_layernorm.weight", 4},
      {"blocks.0.self_attn.q_proj.weight", 77},
      {"blocks.0.self_attn.k_proj.weight", 300},
      {"blocks.1.self_attn.v_proj.weight", 45},
      {"blocks.1.self_attn.o_proj.weight", 131},
      {"blocks.1.post_attention_layernorm.weight", 9},
      {"blocks.0.mlp.gate_proj.weight", 600},
      {"blocks.1.mlp.up_proj.weight", 222},
      {"blocks.1.mlp.down_proj.weight", 500},
      {"norm.weight", 7},
      {"lm_head.weight", 40},
  };
  autoloco::test::check_finite_differences(*model, objective, entries, 1e-7);
}

TEST_CASE("a preset sets the model keys and keys beside it override them", "[config][model]") {
  const auto c = autoloco::parse_config("model: {preset: llama-3-8b, n_layer: 2}\n");
  CHECK(c.model.arch == "llama");
  CHECK(c.model.n_layer == 2);
  CHECK(c.model.d_model == 4096);
  CHECK(c.model.rope_theta == 500000.0);
  CHECK_FALSE(c.model.tie_embeddings);
  const auto over = autoloco::parse_config("model: {preset: llama-3.2-1b}\n",
                                           {"model.tie_embeddings=false", "model.vocab_size=256"});
  CHECK_FALSE(over.model.tie_embeddings);
  CHECK(over.model.vocab_size == 256);
  // The effective config loads back to itself.
  const auto again = autoloco::parse_config(autoloco::to_yaml(c));
  CHECK(autoloco::to_yaml(again) == autoloco::to_yaml(c));
  CHECK_THROWS_WITH(autoloco::parse_config("model: {preset: llama-3-7b}\n"),
                    Catch::Contains("model.preset") && Catch::Contains("llama-3-8b"));
}

TEST_CASE("the head is tied by default for gpt2 and untied for llama", "[config][model]") {
  CHECK(autoloco::parse_config("").model.tie_embeddings);
  CHECK_FALSE(autoloco::parse_config("model: {arch: llama, n_kv_head: 2}\n").model.tie_embeddings);
  CHECK(
      autoloco::parse_config("model: {arch: llama, tie_embeddings: true}\n").model.tie_embeddings);
}

TEST_CASE("llama keys are refused for gpt2 and impossible llama sizes are named",
          "[config][model]") {
  CHECK_THROWS_WITH(autoloco::parse_config("model: {n_kv_head: 2}\n"),
                    Catch::Contains("model.n_kv_head") && Catch::Contains("llama only"));
  CHECK_THROWS_WITH(autoloco::parse_config("model: {rope_theta: 500000.0}\n"),
                    Catch::Contains("model.rope_theta"));
  CHECK_THROWS_WITH(autoloco::parse_config("model: {arch: llama, n_head: 4, n_kv_head: 3}\n"),
                    Catch::Contains("model.n_kv_head"));
  CHECK_THROWS_WITH(
      autoloco::parse_config("model: {arch: llama, n_head: 4, d_model: 12, n_kv_head: 2}\n"),
      Catch::Contains("even head width"));
  CHECK_THROWS_WITH(autoloco::parse_config("model: {arch: mamba}\n"),
                    Catch::Contains("model.arch"));
}

TEST_CASE("rope scaling: linear divides every frequency, llama3 the low ones, blending between",
          "[model][llama]") {
  // Llama 3.2's settings: theta 500000, head 64, factor 32, frequency factors 1 and 4, an
  // original context of 8192. The reference below is the rule in double precision.
  ModelConfig c;
  c.arch = "llama";
  c.rope_theta = 500000.0;
  const int64_t D = 64;
  const torch::Tensor plain = autoloco::rope_inverse_frequencies(c, D, torch::kCPU);
  c.rope_scaling = "linear";
  c.rope_factor = 4.0;
  CHECK(torch::allclose(autoloco::rope_inverse_frequencies(c, D, torch::kCPU), plain / 4.0));
  c.rope_scaling = "llama3";
  c.rope_factor = 32.0;
  c.rope_low_freq_factor = 1.0;
  c.rope_high_freq_factor = 4.0;
  c.rope_original_seq_len = 8192;
  const torch::Tensor scaled = autoloco::rope_inverse_frequencies(c, D, torch::kCPU);
  REQUIRE(scaled.numel() == D / 2);
  int kept = 0;
  int divided = 0;
  int blended = 0;
  for (int64_t i = 0; i < D / 2; ++i) {
    const double inv = std::pow(500000.0, -2.0 * static_cast<double>(i) / D);
    const double wavelength = 2.0 * M_PI / inv;
    double want = inv;
    if (wavelength > 8192.0) {
      want = inv / 32.0;
      ++divided;
    } else if (wavelength >= 8192.0 / 4.0) {
      const double smooth = (8192.0 / wavelength - 1.0) / (4.0 - 1.0);
      want = (1.0 - smooth) * inv / 32.0 + smooth * inv;
      ++blended;
    } else {
      ++kept;
    }
    INFO("i " << i << " wavelength " << wavelength);
    CHECK(scaled[i].item<double>() == Approx(want).epsilon(1e-5));
  }
  // Every regime occurs at these settings.
  CHECK(kept > 0);
  CHECK(divided > 0);
  CHECK(blended > 0);
}

TEST_CASE("qk_norm makes attention blind to the scale of q and k; q/k/v biases start at zero",
          "[model][llama]") {
  torch::manual_seed(11);
  ModelConfig c = tiny_llama(2, false);
  c.qk_norm = true;
  c.head_dim = 16;
  c.norm_eps = 1e-12;  // so that the norm's invariance to scale is exact up to rounding
  auto model = autoloco::make_decoder(c);
  model->eval();
  const torch::Tensor tokens = random_tokens(c, 2, 8);
  const torch::Tensor before = model->forward(tokens);
  torch::NoGradGuard no_grad;
  // Each query and key head is normalised before the rotation: scaling its projection is moot.
  param(model, "blocks.0.self_attn.q_proj.weight").mul_(7.0);
  param(model, "blocks.0.self_attn.k_proj.weight").mul_(0.25);
  CHECK(torch::allclose(model->forward(tokens), before, 1e-4, 1e-5));
  // Biases start at zero: with the same weights, the biased model computes the plain one.
  ModelConfig biased = tiny_llama(2, false);
  biased.attention_bias = true;
  ModelConfig plain = biased;
  plain.attention_bias = false;
  auto with = autoloco::make_decoder(biased);
  auto without = autoloco::make_decoder(plain);
  with->eval();
  without->eval();
  for (auto& item : without->named_parameters())
    item.value().copy_(param(with, item.key()));
  const torch::Tensor reference = without->forward(tokens);
  CHECK(torch::allclose(with->forward(tokens), reference, 1e-5, 1e-6));
  // And they are wired in: a value bias changes the output.
  param(with, "blocks.1.self_attn.v_proj.bias").normal_(0.0, 1.0);
  CHECK_FALSE(torch::allclose(with->forward(tokens), reference, 1e-4, 1e-5));
}
