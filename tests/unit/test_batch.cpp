// AdLoCo's batch control: the norm and inner-product tests on synthetic gradient samples whose
// variance is known, the micro-batch plan, the adloco controller's rules, switch mode (equal
// micro-batches give exactly the large batch's loss and gradient) and the gradient samples of a
// dc of one rank.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/stream.hpp"
#include "autoloco/model/gpt.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/sched/adloco_batch.hpp"
#include "autoloco/sched/batch_controller.hpp"
#include "autoloco/sched/gradient_noise.hpp"
#include "autoloco/train/batch_step.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

// Steps of M samples g_m = g + e_m, each e_m the mean of b per-sequence noises of standard
// deviation sigma per coordinate (so sd sigma / sqrt(b)), summed as a rank would.
NoiseSums synthetic_sums(const std::vector<double>& g, double sigma, int64_t samples,
                         int64_t sample_batch, int steps, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0,
                                          sigma / std::sqrt(static_cast<double>(sample_batch)));
  const size_t d = g.size();
  NoiseSums sums;
  std::vector<std::vector<double>> x(static_cast<size_t>(samples), std::vector<double>(d));
  for (int t = 0; t < steps; ++t) {
    std::vector<double> mean(d, 0.0);
    for (auto& sample : x) {
      for (size_t i = 0; i < d; ++i) {
        sample[i] = g[i] + normal(rng);
        mean[i] += sample[i] / static_cast<double>(samples);
      }
    }
    double mean_sq = 0.0;
    for (double v : mean)
      mean_sq += v * v;
    std::vector<double> norms;
    std::vector<double> dots;
    for (const auto& sample : x) {
      double n = 0.0, dot = 0.0;
      for (size_t i = 0; i < d; ++i) {
        n += sample[i] * sample[i];
        dot += sample[i] * mean[i];
      }
      norms.push_back(n);
      dots.push_back(dot);
    }
    sums.add_step(norms.data(), dots.data(), norms.size(), mean_sq, true);
  }
  return sums;
}

double squared_norm(const std::vector<double>& g) {
  double s = 0.0;
  for (double v : g)
    s += v * v;
  return s;
}

}  // namespace

TEST_CASE("norm test: the requested batch matches the closed form for a known variance",
          "[batch]") {
  const std::vector<double> g(64, 0.05);  // ‖g‖² = 0.16
  const double sigma = 0.4;               // per sequence: tr Σ = 64 * 0.16 = 10.24
  const int64_t M = 8, b = 4;
  const double theta = 0.5;
  const NoiseSums sums = synthetic_sums(g, sigma, M, b, 3000, 7);
  const double trace = 64 * sigma * sigma;
  // ḡ² estimates ‖g‖² + tr Σ / (M b): the test sees that, as a trainer would.
  const double mean_sq = squared_norm(g) + trace / static_cast<double>(M * b);
  const NoiseEstimate e = estimate_noise(sums, M, b);
  CHECK(e.variance == Approx(trace).epsilon(0.03));
  CHECK(e.mean_sq == Approx(mean_sq).epsilon(0.02));
  const double expected = trace / (static_cast<double>(M) * theta * theta * mean_sq);
  CHECK(norm_test_batch(sums, M, b, theta) == Approx(expected).epsilon(0.04));
  // Halving theta asks for four times the batch.
  CHECK(norm_test_batch(sums, M, b, theta / 2) == Approx(4 * norm_test_batch(sums, M, b, theta)));
}

TEST_CASE("inner-product test: both terms match the closed form for isotropic noise", "[batch]") {
  std::vector<double> g(32, 0.0);
  g[0] = 0.6;  // ‖g‖² = 0.36
  const double sigma = 0.3;
  const int64_t M = 16, b = 2;
  const NoiseSums sums = synthetic_sums(g, sigma, M, b, 3000, 11);
  const NoiseEstimate e = estimate_noise(sums, M, b);
  // The tests project on the measured ḡ, whose ‖ḡ‖² is ‖g‖² + d σ² / (M b). Along it the
  // per-sequence variance of ⟨e, ḡ⟩ is σ²‖ḡ‖²; across it (d − 1) σ².
  const double mean_sq = squared_norm(g) + 32 * sigma * sigma / static_cast<double>(M * b);
  REQUIRE(e.mean_sq == Approx(mean_sq).epsilon(0.02));
  CHECK(e.var_ip == Approx(sigma * sigma * mean_sq).epsilon(0.06));
  CHECK(e.var_orth == Approx(31 * sigma * sigma).epsilon(0.04));
  const double mean_sq2 = e.mean_sq2;
  SECTION("the orthogonal term decides when vartheta is small") {
    const double expected = 31 * sigma * sigma / (0.3 * 0.3 * mean_sq) / M;
    CHECK(inner_product_test_batch(sums, M, b, 10.0, 0.3) == Approx(expected).epsilon(0.05));
  }
  SECTION("the inner-product term decides when nu is small") {
    const double expected = sigma * sigma * mean_sq / (0.05 * 0.05 * mean_sq2) / M;
    CHECK(inner_product_test_batch(sums, M, b, 0.05, 10.0) == Approx(expected).epsilon(0.07));
  }
}

TEST_CASE("norm test by hand: two orthogonal unit samples", "[batch]") {
  // g_1 = (1, 0), g_2 = (0, 1): ḡ = (1/2, 1/2), Σ‖g_m − ḡ‖² = 1, so V = b and the test asks
  // for b / (2 θ² · 1/2) = b / θ² sequences per sample.
  NoiseSums sums;
  const double norms[2] = {1.0, 1.0};
  const double dots[2] = {0.5, 0.5};
  sums.add_step(norms, dots, 2, 0.5, true);
  CHECK(norm_test_batch(sums, 2, 8, 1.0) == Approx(8.0));
  CHECK(norm_test_batch(sums, 2, 8, 0.5) == Approx(32.0));
  // Both samples lie at the same angle to ḡ: no variance along it, all across it.
  const NoiseEstimate e = estimate_noise(sums, 2, 8);
  CHECK(e.var_ip == Approx(0.0).margin(1e-12));
  CHECK(e.var_orth == Approx(8.0));
  // No steps, or a zero mean gradient: no answer.
  CHECK(std::isnan(norm_test_batch(NoiseSums{}, 2, 8, 1.0)));
}

TEST_CASE("noise sums of a dc add up over its members", "[batch]") {
  // Member 0 counts the dc-wide terms, member 1 only its own samples.
  NoiseSums a, b;
  const double n0[1] = {2.0}, d0[1] = {1.0}, n1[1] = {4.0}, d1[1] = {3.0};
  a.add_step(n0, d0, 1, 2.0, true);
  b.add_step(n1, d1, 1, 2.0, false);
  a.add(b);
  CHECK(a.steps == 1.0);
  CHECK(a.sample_sq == 6.0);
  CHECK(a.dot_sq == 10.0);
  CHECK(a.dot_sq_rel == 5.0);
  CHECK(a.mean_sq == 2.0);
  CHECK(a.mean_sq2 == 4.0);
  CHECK(NoiseSums::from_array(a.to_array()).to_array() == a.to_array());
}

TEST_CASE("plan_batch cuts a batch into the fewest equal micro-batches", "[batch]") {
  auto same = [](BatchPlan p, int64_t batch, int64_t micro, int64_t accum) {
    return p.batch == batch && p.micro_batch == micro && p.accum == accum;
  };
  CHECK(same(plan_batch(8, 8, 1), 8, 8, 1));
  CHECK(same(plan_batch(8, 8, 2), 8, 4, 2));  // two samples per rank: two halves
  CHECK(same(plan_batch(12, 4, 1), 12, 4, 3));
  CHECK(same(plan_batch(9, 8, 1), 10, 5, 2));   // rounded up to equal micro-batches
  CHECK(same(plan_batch(17, 8, 2), 20, 5, 4));  // an even count of micro-batches
  // A plan's batch plans to itself (a checkpoint stores the batch, not the plan).
  for (int64_t b = 1; b < 200; ++b) {
    for (int64_t s = 1; s <= 2; ++s) {
      const BatchPlan p = plan_batch(b, 7, s);
      CHECK(p.batch >= b);
      CHECK(p.micro_batch <= 7);
      CHECK(p.accum % s == 0);
      CHECK(same(plan_batch(p.batch, 7, s), p.batch, p.micro_batch, p.accum));
    }
  }
}

TEST_CASE("adloco batch grows to the demand within max_growth and max_batch and never shrinks",
          "[batch]") {
  Config c = parse_config("", {"batch.controller=adloco", "data.batch_size=8", "batch.max_batch=40",
                               "batch.max_growth=2", "batch.theta=1"});
  AdLoCoBatch batch(c.batch, c.data, SampleLayout::for_dc(4));  // 4 members, one sample each
  REQUIRE(batch.plan().batch == 8);
  auto sums_asking = [](double per_sample) {
    // norm test with M = 4, b = 8, θ = 1: demand V / (4 ‖ḡ‖²) with ‖ḡ‖² = 1, so V = 4 demand;
    // Σ‖g_m‖² = V (M − 1) / b + M ‖ḡ‖².
    NoiseSums s;
    s.steps = 1;
    s.mean_sq = 1.0;
    s.mean_sq2 = 1.0;
    s.sample_sq = 4.0 * per_sample * 3.0 / 8.0 + 4.0;
    return s;
  };
  REQUIRE(batch.demand_per_sample(sums_asking(12.0)) == Approx(12.0));
  BatchDecision d = batch.next_batch(sums_asking(12.0));
  CHECK(d.demand == Approx(12.0));
  CHECK(d.batch == 12);
  d = batch.next_batch(sums_asking(100.0));  // growth capped at x2
  CHECK(d.batch == 24);
  d = batch.next_batch(sums_asking(5.0));  // never shrinks
  CHECK(d.batch == 24);
  d = batch.next_batch(NoiseSums{});  // no answer: unchanged
  CHECK(std::isnan(d.demand));
  CHECK(d.batch == 24);
  d = batch.next_batch(sums_asking(1000.0));  // capped at max_batch
  CHECK(d.batch == 40);
  CHECK(batch.plan().accum == 5);
  CHECK(batch.plan().micro_batch == 8);

  AdLoCoBatch resumed(c.batch, c.data, SampleLayout::for_dc(4));
  resumed.load_state(batch.state());
  CHECK(resumed.plan().batch == 40);
  CHECK_THROWS_AS(resumed.load_state({}), CheckpointError);
  FixedBatch fixed(c.data);
  CHECK_THROWS_AS(fixed.load_state({8.0}), CheckpointError);
}

TEST_CASE("config: adloco refuses ddp and a max_batch below the initial batch", "[batch][config]") {
  CHECK_THROWS_WITH(parse_config("", {"batch.controller=adloco", "outer.method=ddp"}),
                    Catch::Contains("batch.controller") && Catch::Contains("ddp"));
  CHECK_THROWS_WITH(
      parse_config("", {"batch.controller=adloco", "data.batch_size=16", "batch.max_batch=8"}),
      Catch::Contains("batch.max_batch"));
  CHECK_THROWS_WITH(parse_config("", {"batch.test=dot"}), Catch::Contains("batch.test"));
  CHECK_THROWS_WITH(parse_config("", {"batch.lr_scaling=linear"}),
                    Catch::Contains("batch.lr_scaling"));
  Config one = parse_config("", {"batch.controller=adloco", "data.batch_size=1"});
  CHECK_THROWS_WITH(validate_world(one, 2), Catch::Contains("data.batch_size"));
  one.topology.ranks_per_dc = 2;
  CHECK_NOTHROW(validate_world(one, 2));
}

namespace {

struct TinyModel {
  test::TempDir dir{"batch"};
  Config config;
  std::unique_ptr<TokenDataset> data;
  Decoder model{nullptr};
  std::unique_ptr<FlatParams> params;

  TinyModel() {
    config = test::tiny_config(test::write_tiny_corpus(dir.file("data")), dir.str());
    data = std::make_unique<TokenDataset>(config.data.train, config.model.vocab_size, "data.train");
    torch::manual_seed(3);
    model = autoloco::make_decoder(config.model);
    params = std::make_unique<FlatParams>(*model);
  }
  BatchStream stream() const {
    return BatchStream(*data, config.model.seq_len, config.data.batch_size, 5, 0, 0, {});
  }
};

}  // namespace

TEST_CASE("switch mode: equal micro-batches give the large batch's loss and gradient",
          "[batch][model]") {
  TinyModel t;
  BatchStream one = t.stream();
  const double loss = forward_backward(t.model, *t.params, one, {12, 12, 1}, torch::kCPU);
  const torch::Tensor grads = t.params->grads().clone();
  for (const BatchPlan plan : {BatchPlan{12, 6, 2}, BatchPlan{12, 4, 3}, BatchPlan{12, 1, 12}}) {
    BatchStream split = t.stream();
    const double micro_loss = forward_backward(t.model, *t.params, split, plan, torch::kCPU);
    INFO("accum " << plan.accum);
    CHECK(micro_loss == Approx(loss).epsilon(1e-6));
    CHECK(torch::allclose(t.params->grads(), grads, 1e-4, 1e-7));
    CHECK(split.cursor().samples == one.cursor().samples);
  }
}

TEST_CASE("gradient samples of a dc of one rank are the two halves of its batch",
          "[batch][model]") {
  TinyModel t;
  // Each half alone, as the reference.
  BatchStream halves = t.stream();
  forward_backward(t.model, *t.params, halves, {4, 4, 1}, torch::kCPU);
  const torch::Tensor g1 = t.params->grads().clone();
  forward_backward(t.model, *t.params, halves, {4, 4, 1}, torch::kCPU);
  const torch::Tensor g2 = t.params->grads().clone();
  const torch::Tensor mean = (g1 + g2) / 2;

  GradientSamples samples(2, true);
  BatchStream whole = t.stream();
  forward_backward(t.model, *t.params, whole, {8, 2, 4}, torch::kCPU, &samples);
  samples.before_sync(*t.params);
  NoiseSums sums;
  samples.after_sync(*t.params, sums);
  const double n1 = g1.dot(g1).item<double>(), n2 = g2.dot(g2).item<double>();
  const double d1 = g1.dot(mean).item<double>(), d2 = g2.dot(mean).item<double>();
  CHECK(sums.steps == 1.0);
  CHECK(sums.sample_sq == Approx(n1 + n2).epsilon(1e-4));
  CHECK(sums.dot_sq == Approx(d1 * d1 + d2 * d2).epsilon(1e-4));
  CHECK(sums.mean_sq == Approx(mean.dot(mean).item<double>()).epsilon(1e-4));
}
