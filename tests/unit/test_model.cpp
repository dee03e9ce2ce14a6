// Unit tests of the GPT decoder: shapes, parameter counts, tied head, causality, initialisation
// statistics and a double-precision finite-difference check of the gradients.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "../support/finite_difference.hpp"
#include "autoloco/model/gpt.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/util/error.hpp"

using autoloco::GPT;
using autoloco::ModelConfig;

namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.seq_len = 8;
  c.vocab_size = 13;
  return c;
}

torch::Tensor random_tokens(const ModelConfig& c, int64_t batch, int64_t t) {
  return torch::randint(0, c.vocab_size, {batch, t}, torch::kLong);
}

// By value: named_parameters() returns a temporary dict, so a reference into it would dangle.
torch::Tensor param(GPT& model, const std::string& name) {
  const auto params = model->named_parameters();
  const auto* p = params.find(name);
  REQUIRE(p != nullptr);
  return *p;
}

}  // namespace

TEST_CASE("GPT forward returns logits of shape [B, T, V]", "[model]") {
  torch::manual_seed(1);
  const auto c = tiny_config();
  GPT model(c);
  const auto logits = model->forward(random_tokens(c, 3, c.seq_len));
  CHECK(logits.sizes() == torch::IntArrayRef({3, c.seq_len, c.vocab_size}));
  // Shorter sequences than seq_len are fine too.
  CHECK(model->forward(random_tokens(c, 2, 5)).sizes() == torch::IntArrayRef({2, 5, c.vocab_size}));
  CHECK_THROWS_AS(model->forward(random_tokens(c, 1, c.seq_len + 1)), autoloco::Error);
}

TEST_CASE("GPT loss at initialisation is close to log(vocab_size)", "[model]") {
  torch::manual_seed(2);
  const auto c = tiny_config();
  GPT model(c);
  const auto idx = random_tokens(c, 4, c.seq_len);
  const double l =
      autoloco::lm_loss(model->forward(idx), random_tokens(c, 4, c.seq_len)).item<double>();
  // Small init makes the logits nearly uniform.
  CHECK(l == Approx(std::log(static_cast<double>(c.vocab_size))).epsilon(0.02));
}

TEST_CASE("GPT rejects n_head that does not divide d_model", "[model]") {
  auto c = tiny_config();
  c.n_head = 3;
  CHECK_THROWS_AS(GPT(c), autoloco::ConfigError);
}

TEST_CASE("GPT parameter count equals the closed form", "[model]") {
  const auto c = tiny_config();
  GPT model(c);
  const int64_t d = c.d_model;
  const int64_t ln = 2 * d;               // weight + bias
  const int64_t qkv = d * 3 * d + 3 * d;  // fused q, k, v
  const int64_t attn_proj = d * d + d;
  const int64_t fc = d * 4 * d + 4 * d;
  const int64_t mlp_proj = 4 * d * d + d;
  const int64_t block = 2 * ln + qkv + attn_proj + fc + mlp_proj;
  const int64_t embeddings = c.vocab_size * d + c.seq_len * d;  // no separate head
  const int64_t non_embedding = c.n_layer * block + ln;
  CHECK(autoloco::parameter_count(*model) == embeddings + non_embedding);
  CHECK(autoloco::non_embedding_parameter_count(c) == non_embedding);
  const double flops = 6.0 * static_cast<double>(non_embedding) +
                       12.0 * static_cast<double>(c.n_layer * d * c.seq_len) +
                       6.0 * static_cast<double>(d * c.vocab_size);
  CHECK(autoloco::flops_per_token(c) == Approx(flops));
}

TEST_CASE("GPT weight decay applies to matrices and embeddings only", "[model]") {
  GPT model(tiny_config());
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    const bool norm_or_bias = name.find("ln_") != std::string::npos ||
                              (name.size() >= 5 && name.substr(name.size() - 5) == ".bias");
    INFO(name);
    CHECK(autoloco::is_decayed(name, item.value()) == !norm_or_bias);
  }
}

TEST_CASE("GPT LM head is tied to the token embedding", "[model]") {
  torch::manual_seed(3);
  const auto c = tiny_config();
  GPT model(c);
  for (const auto& item : model->named_parameters()) {
    INFO(item.key());
    CHECK(item.key().find("head") == std::string::npos);
  }
  // Tokens 0..9 only, so row 12 of wte reaches the logits through the head alone.
  const auto idx = torch::randint(0, 10, {2, c.seq_len}, torch::kLong);
  const int64_t unused = 12;
  const auto before = model->forward(idx).detach();
  {
    torch::NoGradGuard no_grad;
    model->wte->weight[unused].add_(0.5);
  }
  const auto after = model->forward(idx).detach();
  CHECK_FALSE(torch::allclose(before.select(2, unused), after.select(2, unused)));
  CHECK(torch::equal(before.narrow(2, 0, unused), after.narrow(2, 0, unused)));

  // And the head's gradient lands in wte.
  model->forward(idx).select(2, unused).sum().backward();
  CHECK(model->wte->weight.grad()[unused].abs().sum().item<double>() > 0.0);
}

TEST_CASE("GPT is causal: a later token does not change earlier logits", "[model]") {
  torch::manual_seed(4);
  const auto c = tiny_config();
  GPT model(c);
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(c, 2, c.seq_len);
  for (int64_t t = 0; t + 1 < c.seq_len; ++t) {
    auto changed = idx.clone();
    changed.select(1, t + 1).add_(1).remainder_(c.vocab_size);
    const auto a = model->forward(idx);
    const auto b = model->forward(changed);
    INFO("t = " << t);
    CHECK(torch::allclose(a.narrow(1, 0, t + 1), b.narrow(1, 0, t + 1), 0.0, 1e-6));
    CHECK_FALSE(torch::allclose(a.select(1, t + 1), b.select(1, t + 1)));
  }
}

TEST_CASE("GPT initialisation follows GPT-2's statistics", "[model]") {
  torch::manual_seed(5);
  ModelConfig c;
  c.n_layer = 4;
  c.n_head = 4;
  c.d_model = 256;
  c.seq_len = 64;
  c.vocab_size = 512;
  GPT model(c);
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  CHECK(param(model, "blocks.0.mlp.fc.weight").std().item<double>() == Approx(0.02).epsilon(0.02));
  CHECK(param(model, "blocks.1.attn.qkv.weight").std().item<double>() ==
        Approx(0.02).epsilon(0.02));
  CHECK(param(model, "wte.weight").std().item<double>() == Approx(0.02).epsilon(0.02));
  CHECK(param(model, "blocks.2.mlp.proj.weight").std().item<double>() ==
        Approx(residual_std).epsilon(0.02));
  CHECK(param(model, "blocks.3.attn.proj.weight").std().item<double>() ==
        Approx(residual_std).epsilon(0.05));
  CHECK(param(model, "blocks.0.attn.qkv.bias").abs().max().item<double>() == 0.0);
  CHECK(param(model, "ln_f.weight").eq(1.0).all().item<bool>());
  CHECK(param(model, "blocks.1.ln_2.bias").abs().max().item<double>() == 0.0);
}

TEST_CASE("GPT gradients match central finite differences in double precision", "[model]") {
  torch::manual_seed(6);
  const auto c = tiny_config();
  GPT model(c);
  model->to(torch::kDouble);
  {
    // Larger weights than at init make every gradient sizeable, so a relative check bites.
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters())
      p.add_(torch::randn_like(p) * 0.3);
  }
  const auto idx = random_tokens(c, 2, c.seq_len);
  const auto targets = random_tokens(c, 2, c.seq_len);
  auto objective = [&] { return autoloco::lm_loss(model->forward(idx), targets); };
  objective().backward();

  // q (index < d) and v (index >= 2d) biases only: a key bias shifts every score of a query
  // equally, which softmax ignores, so its gradient is exactly zero.
  const std::vector<std::pair<std::string, int64_t>> entries = {
      {"wte.weight", 3 * c.d_model + 1},  {"wpe.weight", 2 * c.d_model + 5},
      {"blocks.0.ln_1.weight", 4},        {"blocks.0.attn.qkv.weight", 77},
      {"blocks.0.attn.qkv.bias", 5},      {"blocks.0.attn.qkv.bias", 2 * c.d_model + 3},
      {"blocks.1.attn.proj.weight", 131}, {"blocks.1.mlp.fc.weight", 600},
      {"blocks.1.mlp.proj.bias", 9},      {"ln_f.bias", 7},
  };
  autoloco::test::check_finite_differences(*model, objective, entries);
}
