// The outer optimizer (Nesterov and heavy-ball SGD, plain averaging, the momentum schedule) and
// the fixed interval controller (the agreement statistic: test_agreement.cpp).
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "../support/counting_allocator.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/optim/outer_optimizer.hpp"
#include "autoloco/sched/interval_controller.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

RoundStats at_step(int64_t step) {
  RoundStats s;
  s.step = step;
  return s;
}

}  // namespace

TEST_CASE("outer Nesterov: two steps follow b <- mu b + d, theta <- theta - lr (d + mu b)",
          "[outer]") {
  NesterovOuter outer(0.7, 0.9, {}, true);
  torch::Tensor anchor = torch::tensor({1.0F, -2.0F});
  torch::Tensor d1 = torch::tensor({0.1F, 0.2F});
  torch::Tensor d2 = torch::tensor({-0.3F, 0.05F});
  outer.step(anchor, d1, at_step(10));
  // b = d1; theta = theta0 - 0.7 (d1 + 0.9 d1)
  CHECK(anchor[0].item<float>() == Approx(1.0 - 0.7 * 1.9 * 0.1));
  CHECK(anchor[1].item<float>() == Approx(-2.0 - 0.7 * 1.9 * 0.2));
  outer.step(anchor, d2, at_step(20));
  const double b0 = 0.9 * 0.1 - 0.3;
  CHECK(anchor[0].item<float>() == Approx(1.0 - 0.7 * 1.9 * 0.1 - 0.7 * (-0.3 + 0.9 * b0)));
  CHECK(outer.last_lr() == 0.7);
  CHECK(outer.last_momentum() == 0.9);
}

TEST_CASE("outer Nesterov: in place after the first step, bit for bit the two-temporary form",
          "[outer]") {
  // Across a chunk boundary of the scratch, so that every piece is checked.
  const int64_t n = NesterovOuter::kScratchChunk + 1001;
  const size_t full = static_cast<size_t>(n) * sizeof(float);
  torch::manual_seed(11);
  const torch::Tensor start = torch::randn({n});
  std::vector<torch::Tensor> deltas;
  for (int k = 0; k < 3; ++k)
    deltas.push_back(0.01 * torch::randn({n}));

  // The form the optimizer had: Δ̄ + mu * b allocates mu b and the sum.
  torch::Tensor expected = start.clone();
  torch::Tensor b = torch::zeros({n});
  for (const torch::Tensor& d : deltas) {
    b.mul_(0.9).add_(d);
    expected.sub_(d + 0.9 * b, 0.7);
  }

  NesterovOuter outer(0.7, 0.9, {}, true);
  torch::Tensor anchor = start.clone();
  torch::Tensor mean_delta = deltas[0].clone();
  outer.step(anchor, mean_delta, at_step(10));
  const void* momentum = outer.state()[0].second.data_ptr();
  test::CountingCpuAllocator allocations(full / 2);
  for (size_t k = 1; k < deltas.size(); ++k) {
    mean_delta.copy_(deltas[k]);
    outer.step(anchor, mean_delta, at_step(10 * static_cast<int64_t>(k + 1)));
  }
  CHECK(allocations.large() == 0);
  const torch::Tensor control = deltas[0] + 0.9 * b;  // what the old form allocated twice
  CHECK(allocations.large() == 2);
  CHECK(outer.state()[0].second.data_ptr() == momentum);
  CHECK(torch::equal(outer.state()[0].second, b));
  CHECK(torch::equal(anchor, expected));  // bit for bit
}

TEST_CASE("outer heavy ball: theta <- theta - lr b", "[outer]") {
  NesterovOuter outer(0.5, 0.5, {}, false);
  torch::Tensor anchor = torch::tensor({0.0F});
  torch::Tensor d = torch::tensor({1.0F});
  outer.step(anchor, d, at_step(1));
  CHECK(anchor.item<float>() == Approx(-0.5));
  d = torch::tensor({1.0F});
  outer.step(anchor, d, at_step(2));
  CHECK(anchor.item<float>() == Approx(-0.5 - 0.5 * 1.5));
}

TEST_CASE("local_sgd: the new anchor is exactly the mean replica", "[outer]") {
  Config c = parse_config("", {"outer.method=local_sgd"});
  auto outer = make_outer_optimizer(c.outer, c.interval.H);
  const torch::Tensor anchor0 = torch::randn({64});
  const torch::Tensor mean_replica = anchor0 + 0.01 * torch::randn({64});
  torch::Tensor anchor = anchor0.clone();
  torch::Tensor mean_delta = anchor0 - mean_replica;
  outer->step(anchor, mean_delta, at_step(5));
  CHECK(torch::allclose(anchor, mean_replica, 0.0, 1e-7));
  CHECK(outer->last_lr() == 1.0);
  CHECK(outer->last_momentum() == 0.0);
}

TEST_CASE("momentum_mode error_feedback: the outer step has no momentum", "[outer]") {
  CHECK_THROWS_WITH(parse_config("", {"outer.momentum_mode=error_feedback"}),
                    Catch::Contains("outer.momentum_mode") && Catch::Contains("error_feedback"));
  CHECK_THROWS_WITH(parse_config("", {"outer.momentum_mode=sparse"}),
                    Catch::Contains("outer.momentum_mode"));
  const Config c = parse_config(
      "", {"outer.momentum_mode=error_feedback", "outer.error_feedback=true",
           "outer.wire_topk=0.02", "outer.wire_dtype=int2", "outer.lr=0.5", "outer.momentum=0.9"});
  auto outer = make_outer_optimizer(c.outer, c.interval.H);
  torch::Tensor anchor = torch::zeros({1});
  torch::Tensor d = torch::ones({1});
  outer->step(anchor, d, at_step(4));
  CHECK(anchor.item<float>() == -0.5F);
  d = torch::ones({1});
  outer->step(anchor, d, at_step(8));  // with momentum 0.9 this would be -0.5 - 0.5 * 1.9
  CHECK(anchor.item<float>() == -1.0F);
  CHECK(outer->last_momentum() == 0.0);
}

TEST_CASE("outer momentum schedule: mu by the round's last step", "[outer]") {
  Config c = parse_config("", {"outer.momentum=0.75", "outer.momentum_schedule=[\"400:0.9\"]"});
  NesterovOuter outer(c.outer.lr, c.outer.momentum, parse_momentum_schedule(c.outer), true);
  CHECK(outer.momentum_at(0) == 0.75);
  CHECK(outer.momentum_at(399) == 0.75);
  CHECK(outer.momentum_at(400) == 0.9);
  CHECK(outer.momentum_at(10000) == 0.9);
  torch::Tensor anchor = torch::zeros({1});
  torch::Tensor d = torch::ones({1});
  outer.step(anchor, d, at_step(420));
  CHECK(outer.last_momentum() == 0.9);
}

TEST_CASE("outer config: bad values name the key", "[outer][config]") {
  CHECK_THROWS_WITH(parse_config("", {"outer.method=adam"}), Catch::Contains("outer.method"));
  CHECK_THROWS_WITH(parse_config("", {"outer.momentum=1.0"}), Catch::Contains("outer.momentum"));
  CHECK_THROWS_WITH(parse_config("", {"outer.momentum_schedule=[\"400\"]"}),
                    Catch::Contains("outer.momentum_schedule"));
  CHECK_THROWS_WITH(parse_config("", {"outer.momentum_schedule=[\"400:0.9\", \"300:0.8\"]"}),
                    Catch::Contains("steps must increase"));
  CHECK_THROWS_WITH(parse_config("", {"outer.wire_dtype=fp4"}),
                    Catch::Contains("outer.wire_dtype"));
  CHECK_THROWS_WITH(parse_config("", {"outer.wire_block=33"}), Catch::Contains("outer.wire_block"));
  CHECK_THROWS_WITH(parse_config("", {"outer.wire_rounding=up"}),
                    Catch::Contains("outer.wire_rounding"));
  CHECK_THROWS_WITH(parse_config("", {"outer.error_feedback=true"}),
                    Catch::Contains("outer.error_feedback") && Catch::Contains("fp32"));
  CHECK_THROWS_WITH(
      parse_config("", {"outer.error_feedback=true", "outer.wire_dtype=int4", "outer.method=ddp"}),
      Catch::Contains("outer.error_feedback") && Catch::Contains("ddp"));
  CHECK_NOTHROW(parse_config("", {"outer.error_feedback=true", "outer.wire_dtype=e3m0",
                                  "outer.wire_rounding=stochastic", "outer.wire_block=64"}));
  // The sparse wire: always with error feedback, which it gives fp32 values too.
  CHECK_THROWS_WITH(parse_config("", {"outer.wire_topk=0.02"}),
                    Catch::Contains("outer.wire_topk") && Catch::Contains("error_feedback"));
  CHECK_NOTHROW(parse_config("", {"outer.wire_topk=0.02", "outer.error_feedback=true"}));
  CHECK_NOTHROW(parse_config("", {"outer.wire_topk=0.02", "outer.error_feedback=true",
                                  "outer.wire_dtype=int2", "outer.error_feedback_beta=0.9"}));
  CHECK_THROWS_WITH(parse_config("", {"outer.wire_topk=1.5", "outer.error_feedback=true"}),
                    Catch::Contains("outer.wire_topk"));
  CHECK_THROWS_WITH(parse_config("", {"outer.wire_topk_chunk=1"}),
                    Catch::Contains("outer.wire_topk_chunk"));
  CHECK_THROWS_WITH(parse_config("", {"outer.error_feedback_beta=2"}),
                    Catch::Contains("outer.error_feedback_beta"));
  CHECK_THROWS_WITH(parse_config("", {"outer.wire_dtype=int2", "outer.wire_block=6"}),
                    Catch::Contains("outer.wire_block") && Catch::Contains("multiple of 4"));
  CHECK_THROWS_WITH(parse_config("", {"interval.H=0"}), Catch::Contains("interval.H"));
  CHECK_THROWS_WITH(parse_config("", {"wan.mode=fast"}), Catch::Contains("wan.mode"));
  CHECK_THROWS_WITH(parse_config("", {"wan.bandwidth_gbps=0"}),
                    Catch::Contains("wan.bandwidth_gbps"));
  CHECK_THROWS_WITH(make_outer_optimizer(parse_config("", {"outer.method=ddp"}).outer, 20),
                    Catch::Contains("no outer optimizer"));
}

TEST_CASE("fixed interval: H every round, no state", "[sched]") {
  auto c = make_interval_controller(parse_config("", {"interval.H=17"}));
  CHECK(c->name() == "fixed");
  CHECK(c->first_interval() == 17);
  RoundStats s;
  s.rho = 0.9;
  CHECK(c->next_interval(s) == 17);
  CHECK(c->state().empty());
  CHECK_NOTHROW(c->load_state({}));
  CHECK_THROWS_AS(c->load_state({1.0}), CheckpointError);
}

TEST_CASE("outer correction: every mode is plain DiLoCo while H stays H_0", "[outer][correction]") {
  // A cosine-like inner lr changes S_k from round to round; r_k = H_k / H_0 stays 1.
  const std::vector<double> lr_sums = {0.001, 0.02, 0.06, 0.05, 0.03, 0.01, 0.004};
  torch::manual_seed(7);
  std::vector<torch::Tensor> deltas;
  for (size_t k = 0; k < lr_sums.size(); ++k)
    deltas.push_back(0.01 * torch::randn({257}));
  const torch::Tensor start = torch::randn({257});
  auto run = [&](CorrectionMode mode) {
    NesterovOuter outer(0.7, 0.9, {}, true, OuterCorrection{mode, 0.5, 20});
    torch::Tensor anchor = start.clone();
    for (size_t k = 0; k < deltas.size(); ++k) {
      RoundStats s = at_step(20 * static_cast<int64_t>(k + 1));
      s.H = 20;
      s.lr_sum = lr_sums[k];
      torch::Tensor d = deltas[k].clone();  // the step works in its storage
      outer.step(anchor, d, s);
      CHECK(outer.last_momentum() == 0.9);
      CHECK(outer.last_lr() == 0.7);
    }
    return anchor;
  };
  const torch::Tensor plain = run(CorrectionMode::none);
  for (CorrectionMode mode : {CorrectionMode::momentum, CorrectionMode::lr, CorrectionMode::both}) {
    CHECK(torch::equal(run(mode), plain));  // bit for bit
  }
}

TEST_CASE("outer correction: mu and lr for a round of 2 H_0", "[outer][correction]") {
  const double mu = 0.9;
  const double lr = 0.7;
  const auto step = [&](CorrectionMode m, int64_t H) {
    return corrected_step(OuterCorrection{m, 0.5, 20}, mu, lr, H);
  };
  CHECK(step(CorrectionMode::none, 40).momentum == mu);
  CHECK(step(CorrectionMode::none, 40).lr == lr);
  CHECK(step(CorrectionMode::momentum, 40).momentum == Approx(0.81));
  CHECK(step(CorrectionMode::momentum, 40).lr == lr);
  CHECK(step(CorrectionMode::momentum, 10).momentum == Approx(std::sqrt(0.9)));
  CHECK(step(CorrectionMode::lr, 40).momentum == mu);
  CHECK(step(CorrectionMode::lr, 40).lr == Approx(0.7 * std::sqrt(2.0)));
  // both keeps the steady-state gain lr / (1 − mu): (1 − 0.81) / (1 − 0.9) = 1.9.
  CHECK(step(CorrectionMode::both, 40).momentum == Approx(0.81));
  CHECK(step(CorrectionMode::both, 40).lr == Approx(0.7 * 1.9));
  const OuterStep b = step(CorrectionMode::both, 40);
  CHECK(b.lr / (1.0 - b.momentum) == Approx(lr / (1.0 - mu)));
  // The scheduled momentum is what gets corrected.
  Config c = parse_config("", {"outer.momentum=0.75", "outer.momentum_schedule=[\"400:0.9\"]",
                               "outer.correction=momentum", "interval.H=20"});
  auto outer = make_outer_optimizer(c.outer, c.interval.H);
  torch::Tensor anchor = torch::zeros({1});
  RoundStats s = at_step(420);
  s.H = 40;
  torch::Tensor d = torch::ones({1});
  outer->step(anchor, d, s);
  CHECK(outer->last_momentum() == Approx(0.81));
}
