// Unit tests of the GPU-minded inner step, on the CPU: bf16 autocast (the scope, its weight
// cache, fp32 master weights), the fused AdamW kernel against the flat update, clipping without
// a host read, and the config keys that choose them (run.precision, run.tf32, inner.adamw).
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/small_model.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/model/gpt.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/inner_optimizer.hpp"
#include "autoloco/train/precision.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

ModelConfig tiny_model() {
  return test::small_model_config();
}

GPT seeded(const ModelConfig& c) {
  torch::manual_seed(7);
  return GPT(c);
}

torch::Tensor tokens(const ModelConfig& c, uint64_t seed) {
  auto gen = torch::make_generator<torch::CPUGeneratorImpl>(seed);
  return torch::randint(0, c.vocab_size, {4, c.seq_len}, gen, torch::kLong);
}

double loss_of(GPT& model, const torch::Tensor& idx, bool bf16) {
  torch::NoGradGuard no_grad;
  AutocastScope autocast(torch::kCPU, bf16);
  return lm_loss(model->forward(idx), idx).item<double>();
}

void fill_grads(FlatParams& p, uint64_t seed) {
  auto gen = torch::make_generator<torch::CPUGeneratorImpl>(seed);
  p.grads().copy_(torch::randn({p.numel()}, gen) * 0.01);
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

}  // namespace

TEST_CASE("bf16 autocast runs the forward in bf16 over fp32 weights and gradients", "[precision]") {
  const auto c = tiny_model();
  GPT model = seeded(c);
  FlatParams flat(*model);
  const torch::Tensor idx = tokens(c, 1);
  torch::Tensor loss;
  {
    AutocastScope autocast(torch::kCPU, true);
    const torch::Tensor logits = model->forward(idx);
    CHECK(logits.scalar_type() == torch::kBFloat16);
    loss = lm_loss(logits, idx);
  }
  CHECK(loss.scalar_type() == torch::kFloat);  // cross-entropy is one of autocast's fp32 ops
  loss.backward();
  CHECK(flat.values().scalar_type() == torch::kFloat);
  CHECK(flat.grads().scalar_type() == torch::kFloat);
  CHECK(flat.grads_attached());
  CHECK(flat.grads().abs().sum().item<double>() > 0.0);
  // bf16 keeps 8 bits of mantissa: the loss agrees with fp32 to well under 1%.
  const double fp32 = loss_of(model, idx, false);
  CHECK(loss.item<double>() == Approx(fp32).epsilon(0.01));
}

TEST_CASE("the autocast scope restores the previous state and is off when disabled",
          "[precision]") {
  const auto c = tiny_model();
  GPT model = seeded(c);
  const torch::Tensor idx = tokens(c, 2);
  {
    AutocastScope off(torch::kCPU, false);
    CHECK(model->forward(idx).scalar_type() == torch::kFloat);
  }
  { AutocastScope on(torch::kCPU, true); }
  CHECK(model->forward(idx).scalar_type() == torch::kFloat);
}

TEST_CASE("leaving the autocast scope drops the cached bf16 weights", "[precision]") {
  // An optimizer step changes the fp32 weights in place; a bf16 copy cached across steps would
  // make the next forward use the old weights.
  const auto c = tiny_model();
  const torch::Tensor idx = tokens(c, 3);
  GPT stepped = seeded(c);
  GPT fresh = seeded(c);
  auto change = [](GPT& m) {
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters())
      p.mul_(0.5);
  };
  const double before = loss_of(stepped, idx, true);
  change(stepped);
  change(fresh);
  const double after = loss_of(stepped, idx, true);
  CHECK(after != before);
  CHECK(after == loss_of(fresh, idx, true));
}

TEST_CASE("the fused AdamW kernel gives the flat update's parameters and moments", "[precision]") {
  const auto c = tiny_model();
  GPT a = seeded(c);
  GPT b = seeded(c);
  FlatParams pa(*a), pb(*b);
  AdamWOptions o;
  o.weight_decay = 0.1;
  FlatAdamW flat(pa, o);
  o.fused = true;
  FlatAdamW fused(pb, o);
  const torch::Tensor decayed_before = pb.values().narrow(0, 0, pb.decay_numel()).clone();
  for (int step = 1; step <= 5; ++step) {
    fill_grads(pa, static_cast<uint64_t>(step));
    fill_grads(pb, static_cast<uint64_t>(step));
    flat.step(1e-2 / step);
    fused.step(1e-2 / step);
  }
  CHECK(fused.step_count() == 5);
  // The same arithmetic in another order: last-bit differences only.
  CHECK(rel_diff(pb.values(), pa.values()) < 1e-6);
  CHECK(rel_diff(fused.exp_avg(), flat.exp_avg()) < 1e-6);
  CHECK(rel_diff(fused.exp_avg_sq(), flat.exp_avg_sq()) < 1e-6);
  CHECK(!torch::equal(pb.values().narrow(0, 0, pb.decay_numel()), decayed_before));
}

TEST_CASE("fused AdamW decays only the decayed slice", "[precision]") {
  const auto c = tiny_model();
  GPT model = seeded(c);
  FlatParams p(*model);
  AdamWOptions o;
  o.weight_decay = 0.5;
  o.fused = true;
  FlatAdamW adamw(p, o);
  const torch::Tensor before = p.values().clone();
  p.zero_grad();  // no gradient: only the decay moves anything
  adamw.step(0.1);
  const int64_t d = p.decay_numel();
  CHECK(torch::allclose(p.values().narrow(0, 0, d), before.narrow(0, 0, d) * 0.95, 1e-6, 0.0));
  CHECK(torch::equal(p.values().narrow(0, d, p.numel() - d), before.narrow(0, d, p.numel() - d)));
}

TEST_CASE("clip_grad_norm_async on the CPU is clip_grad_norm bit for bit", "[precision]") {
  const auto c = tiny_model();
  GPT a = seeded(c);
  GPT b = seeded(c);
  FlatParams pa(*a), pb(*b);
  fill_grads(pa, 9);
  fill_grads(pb, 9);
  const double norm = clip_grad_norm(pa, 0.01);
  const torch::Tensor async_norm = clip_grad_norm_async(pb, 0.01);
  CHECK(async_norm.dim() == 0);
  CHECK(async_norm.item<double>() == norm);
  CHECK(torch::equal(pa.grads(), pb.grads()));
}

TEST_CASE("run.precision auto is bf16 on cuda and fp32 on the cpu", "[precision]") {
  RunConfig run;
  CHECK(run.precision == "auto");
  CHECK(run.tf32);
  CHECK_FALSE(uses_bf16(run, torch::kCPU));
  CHECK(uses_bf16(run, torch::Device(torch::kCUDA, 0)));
  run.precision = "fp32";
  CHECK_FALSE(uses_bf16(run, torch::Device(torch::kCUDA, 0)));
  run.precision = "bf16";
  CHECK(uses_bf16(run, torch::kCPU));
}

TEST_CASE("inner.adamw auto keeps the flat kernel on the cpu", "[precision]") {
  const auto c = tiny_model();
  GPT model = seeded(c);
  FlatParams p(*model);
  InnerConfig inner;
  CHECK(inner.adamw == "auto");
  auto opt = make_inner_optimizer(inner, p);
  const auto* adamw = dynamic_cast<const FlatAdamW*>(opt.get());
  REQUIRE(adamw != nullptr);
  CHECK_FALSE(adamw->options().fused);
  inner.adamw = "fused";
  opt = make_inner_optimizer(inner, p);
  CHECK(dynamic_cast<const FlatAdamW*>(opt.get())->options().fused);
}

TEST_CASE("config: precision and adamw keys are checked and named", "[precision][config]") {
  auto error_of = [](const std::vector<std::string>& sets) {
    try {
      parse_config("", sets);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error_of({"run.precision=fp16"}),
             Catch::Contains("run.precision") && Catch::Contains("auto, fp32, bf16"));
  CHECK_THAT(error_of({"inner.adamw=foreach"}), Catch::Contains("inner.adamw"));
  CHECK_THAT(error_of({"run.tf32=maybe"}), Catch::Contains("run.tf32"));
  CHECK(error_of({"inner.adamw=fused", "run.precision=bf16", "run.tf32=false"}).empty());
}
