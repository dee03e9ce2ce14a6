// Unit tests of the inner optimizer: FlatParams aliasing and in-place gradient accumulation,
// FlatAdamW against torch::optim::AdamW, gradient clipping against torch, the lr schedule.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../support/small_model.hpp"
#include "autoloco/model/gpt.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/lr_schedule.hpp"
#include "autoloco/util/error.hpp"

using autoloco::FlatParams;
using autoloco::GPT;
using autoloco::ModelConfig;

namespace {

ModelConfig small_config() {
  return autoloco::test::small_model_config();
}

struct Batch {
  torch::Tensor idx;
  torch::Tensor targets;
};

Batch random_batch(const ModelConfig& c, int64_t seed) {
  auto gen = torch::make_generator<torch::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  return {torch::randint(0, c.vocab_size, {4, c.seq_len}, gen, torch::kLong),
          torch::randint(0, c.vocab_size, {4, c.seq_len}, gen, torch::kLong)};
}

GPT seeded_model(const ModelConfig& c) {
  torch::manual_seed(42);
  return GPT(c);
}

void backward(GPT& model, const Batch& b) {
  autoloco::lm_loss(model->forward(b.idx), b.targets).backward();
}

// By value: named_parameters() returns a temporary dict, so a reference into it would dangle.
torch::Tensor param(GPT& model, const std::string& name) {
  const auto params = model->named_parameters();
  const auto* p = params.find(name);
  REQUIRE(p != nullptr);
  return *p;
}

const char* address(const torch::Tensor& t) {
  return static_cast<const char*>(t.data_ptr());
}

}  // namespace

TEST_CASE("FlatParams lays out decayed parameters first, each once", "[optim]") {
  const auto c = small_config();
  auto model = seeded_model(c);
  FlatParams flat(*model);
  CHECK(flat.numel() == autoloco::parameter_count(*model));
  CHECK(flat.values().dtype() == torch::kFloat);
  CHECK(flat.grads().numel() == flat.numel());

  int64_t decayed = 0;
  int64_t expected_offset = 0;
  bool seen_non_decayed = false;
  for (const auto& s : flat.slices()) {
    INFO(s.name);
    CHECK(s.offset == expected_offset);
    expected_offset += s.numel;
    if (s.decayed) {
      CHECK_FALSE(seen_non_decayed);
      decayed += s.numel;
    }
    seen_non_decayed = seen_non_decayed || !s.decayed;
    CHECK(s.decayed == (s.shape.size() >= 2));
  }
  CHECK(expected_offset == flat.numel());
  CHECK(flat.decay_numel() == decayed);
  CHECK(flat.grads_attached());
}

TEST_CASE("FlatParams shares values with the module", "[optim]") {
  const auto c = small_config();
  auto model = seeded_model(c);
  const auto batch = random_batch(c, 1);
  const auto reference = model->forward(batch.idx).detach();
  FlatParams flat(*model);
  // Building the buffers does not change what the model computes.
  CHECK(torch::equal(model->forward(batch.idx).detach(), reference));

  for (const auto& s : flat.slices()) {
    const auto p = param(model, s.name);
    INFO(s.name);
    CHECK(address(p) == address(flat.values()) + s.offset * 4);
  }
  {
    torch::NoGradGuard no_grad;
    flat.values().mul_(0.5);
  }
  CHECK_FALSE(torch::allclose(model->forward(batch.idx).detach(), reference));
  {
    torch::NoGradGuard no_grad;
    model->wte->weight.fill_(3.0);
  }
  const auto& wte = flat.slices().front();
  REQUIRE(wte.name == "wte.weight");
  CHECK(flat.values().narrow(0, wte.offset, wte.numel).eq(3.0).all().item<bool>());
}

TEST_CASE("FlatParams gradients accumulate in place in the flat buffer", "[optim]") {
  const auto c = small_config();
  auto model = seeded_model(c);
  FlatParams flat(*model);
  const auto batch = random_batch(c, 2);

  backward(model, batch);
  CHECK(flat.grads_attached());
  const auto first = flat.grads().clone();
  CHECK(first.norm().item<double>() > 0.0);
  for (const auto& s : flat.slices()) {
    const auto p = param(model, s.name);
    INFO(s.name);
    CHECK(torch::equal(p.grad().reshape({-1}), first.narrow(0, s.offset, s.numel)));
  }

  backward(model, batch);
  CHECK(flat.grads_attached());
  CHECK(torch::allclose(flat.grads(), 2 * first, 1e-5, 1e-7));

  const auto* grads_before = address(flat.grads());
  flat.zero_grad();
  CHECK(address(flat.grads()) == grads_before);
  CHECK(flat.grads().abs().max().item<double>() == 0.0);
  CHECK(flat.grads_attached());
  backward(model, batch);
  CHECK(torch::allclose(flat.grads(), first, 1e-6, 1e-8));
}

TEST_CASE("FlatParams notices when module zero_grad detaches the gradients", "[optim]") {
  const auto c = small_config();
  auto model = seeded_model(c);
  FlatParams flat(*model);
  backward(model, random_batch(c, 3));
  for (auto& p : model->parameters())
    p.mutable_grad().reset();
  CHECK_FALSE(flat.grads_attached());
}

TEST_CASE("FlatAdamW matches torch::optim::AdamW with decay on matrices only", "[optim]") {
  const auto c = small_config();
  const double lr = 1e-2;
  const autoloco::AdamWOptions opts{0.9, 0.95, 1e-8, 0.1};

  auto ours = seeded_model(c);
  FlatParams flat(*ours);
  autoloco::FlatAdamW adamw(flat, opts);

  auto theirs = seeded_model(c);
  std::vector<torch::Tensor> decayed;
  std::vector<torch::Tensor> others;
  for (const auto& item : theirs->named_parameters()) {
    (autoloco::is_decayed(item.key(), item.value()) ? decayed : others).push_back(item.value());
  }
  auto group_options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(lr)
                                                            .betas({opts.beta1, opts.beta2})
                                                            .eps(opts.eps)
                                                            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, group_options(opts.weight_decay));
  groups.emplace_back(others, group_options(0.0));
  torch::optim::AdamW reference(std::move(groups));

  for (int64_t step = 0; step < 5; ++step) {
    const auto batch = random_batch(c, 100 + step);
    flat.zero_grad();
    backward(ours, batch);
    adamw.step(lr);
    reference.zero_grad();
    backward(theirs, batch);
    reference.step();
  }
  CHECK(adamw.step_count() == 5);
  for (const auto& item : theirs->named_parameters()) {
    const auto mine = param(ours, item.key());
    const double diff = (mine - item.value()).abs().max().item<double>();
    const double scale = item.value().abs().max().item<double>();
    INFO(item.key() << " max diff " << diff << " scale " << scale);
    CHECK(diff <= 1e-6 * scale);
  }
}

TEST_CASE("FlatAdamW set_state restores the optimizer state", "[optim]") {
  const auto c = small_config();
  auto model = seeded_model(c);
  FlatParams flat(*model);
  autoloco::FlatAdamW adamw(flat, {0.9, 0.95, 1e-8, 0.1});
  const auto m = torch::rand({flat.numel()});
  const auto v = torch::rand({flat.numel()});
  adamw.set_state(7, m, v);
  CHECK(adamw.step_count() == 7);
  CHECK(torch::equal(adamw.exp_avg(), m));
  CHECK(torch::equal(adamw.exp_avg_sq(), v));
  CHECK_THROWS_AS(adamw.set_state(1, m.narrow(0, 1, flat.numel() - 1), v), autoloco::Error);
}

TEST_CASE("clip_grad_norm matches torch::nn::utils::clip_grad_norm_", "[optim]") {
  const auto c = small_config();
  const auto batch = random_batch(c, 5);
  auto ours = seeded_model(c);
  FlatParams flat(*ours);
  auto theirs = seeded_model(c);
  backward(ours, batch);
  backward(theirs, batch);

  const double unclipped = flat.grads().norm().item<double>();
  // No clipping when off or when the norm is already small enough.
  CHECK(autoloco::clip_grad_norm(flat, 0.0) == Approx(unclipped));
  CHECK(autoloco::clip_grad_norm(flat, 10.0 * unclipped) == Approx(unclipped));
  CHECK(flat.grads().norm().item<double>() == Approx(unclipped));

  const double max_norm = 0.25 * unclipped;
  const double norm = autoloco::clip_grad_norm(flat, max_norm);
  const double torch_norm = torch::nn::utils::clip_grad_norm_(theirs->parameters(), max_norm);
  CHECK(norm == Approx(torch_norm).epsilon(1e-5));
  CHECK(flat.grads().norm().item<double>() == Approx(max_norm).epsilon(1e-4));
  for (const auto& item : theirs->named_parameters()) {
    const auto mine = param(ours, item.key());
    INFO(item.key());
    CHECK(torch::allclose(mine.grad(), item.value().grad(), 1e-5, 1e-8));
  }
}

TEST_CASE("inner_lr warms up linearly, then decays by cosine to the floor", "[optim]") {
  autoloco::InnerConfig c;
  c.lr = 1e-3;
  c.warmup_steps = 10;
  c.schedule = "cosine";
  c.min_lr_ratio = 0.1;
  const int64_t total = 110;
  CHECK(autoloco::inner_lr(c, 0, total) == Approx(1e-4));
  CHECK(autoloco::inner_lr(c, 4, total) == Approx(5e-4));
  CHECK(autoloco::inner_lr(c, 9, total) == Approx(1e-3));   // last warm-up step: peak
  CHECK(autoloco::inner_lr(c, 10, total) == Approx(1e-3));  // cosine starts at the peak
  CHECK(autoloco::inner_lr(c, 60, total) == Approx(1e-4 + 0.5 * 9e-4));  // midpoint
  CHECK(autoloco::inner_lr(c, total, total) == Approx(1e-4));
  CHECK(autoloco::inner_lr(c, total + 50, total) == Approx(1e-4));
  double previous = autoloco::inner_lr(c, 10, total);
  for (int64_t s = 11; s <= total; ++s) {
    const double lr = autoloco::inner_lr(c, s, total);
    CHECK(lr <= previous);
    previous = lr;
  }
}

TEST_CASE("inner_lr constant schedule holds the peak after warm-up", "[optim]") {
  autoloco::InnerConfig c;
  c.lr = 2e-3;
  c.warmup_steps = 4;
  c.schedule = "constant";
  CHECK(autoloco::inner_lr(c, 1, 100) == Approx(1e-3));
  CHECK(autoloco::inner_lr(c, 4, 100) == Approx(2e-3));
  CHECK(autoloco::inner_lr(c, 99, 100) == Approx(2e-3));
  c.warmup_steps = 0;
  CHECK(autoloco::inner_lr(c, 0, 100) == Approx(2e-3));
  c.schedule = "linear";
  CHECK_THROWS_AS(autoloco::inner_lr(c, 0, 100), autoloco::ConfigError);
}
