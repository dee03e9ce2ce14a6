// The agreement ρ of the dcs' pseudo-gradients under AdLoCo's token weights (RoundStats,
// ALGORITHMS.md §2 and §3): 0 for orthogonal Δ_i and 1 for identical ones whatever the weights,
// DiLoCo's formula bit for bit when the weights are equal; the same over a cycle of fragment
// syncs (CycleStats); and the round message's scalars of checkpoints written before the
// weighted sums rode along.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "autoloco/optim/round_stats.hpp"
#include "autoloco/train/outer_sync.hpp"
#include "autoloco/train/sync_periods.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

// A round's statistics as OuterSync::finish forms them from the dcs' Δ_i and weights w_i:
// the message's sums, then ‖Σ w_i Δ_i / Σ w_i‖² from the fp32 average.
RoundStats round_of(const std::vector<torch::Tensor>& deltas, const std::vector<double>& w) {
  double weights = 0.0, weighted_sq = 0.0, weight_squared_sq = 0.0;
  torch::Tensor sum = torch::zeros_like(deltas[0]);
  for (size_t i = 0; i < deltas.size(); ++i) {
    const double norm = deltas[i].norm().item<double>();
    const double sq = norm * norm;
    weights += w[i];
    weighted_sq += w[i] * sq;
    weight_squared_sq += w[i] * (w[i] * sq);
    sum += deltas[i] * w[i];
  }
  RoundStats s;
  s.dcs = static_cast<int>(deltas.size());
  s.set_delta_sums(weights, weighted_sq, weight_squared_sq);
  const double avg_norm = (sum / weights).norm().item<double>();
  s.avg_delta_sq = avg_norm * avg_norm;
  s.rho = RoundStats::agreement(s.dcs, s.effective_dcs, s.mean_delta_sq, s.avg_delta_sq);
  return s;
}

}  // namespace

TEST_CASE("agreement rho: 1 for equal pseudo-gradients, -1/(G-1) for cancelling ones", "[outer]") {
  // Two dcs, Δ_1 = Δ_2 = x: mean ‖Δ_i‖² = |x|², ‖Δ̄‖² = |x|².
  CHECK(RoundStats::agreement(2, 4.0, 4.0) == Approx(1.0));
  // Δ_2 = −Δ_1: ‖Δ̄‖² = 0.
  CHECK(RoundStats::agreement(2, 4.0, 0.0) == Approx(-1.0));
  // Four orthogonal, equal-norm Δ_i: ‖Δ̄‖² = |x|² / 4, so rho = 0.
  CHECK(RoundStats::agreement(4, 1.0, 0.25) == Approx(0.0).margin(1e-12));
  CHECK(std::isnan(RoundStats::agreement(1, 1.0, 1.0)));
}

TEST_CASE("agreement under token weights: orthogonal 0, identical 1, whatever the weights",
          "[outer][adloco]") {
  const torch::Tensor e1 = torch::tensor({1.0F, 0.0F, 0.0F});
  const torch::Tensor e2 = torch::tensor({0.0F, 1.0F, 0.0F});
  // The review's case: tokens 1 and 3. Unweighted norms against the weighted mean gave
  // (2 · 10/16 − 1) / 1 = 0.25, and the autoloco controller read agreement where there is none.
  const RoundStats orthogonal = round_of({e1, e2}, {1.0, 3.0});
  CHECK(orthogonal.rho == Approx(0.0).margin(1e-6));
  CHECK(orthogonal.effective_dcs == Approx(1.6));  // 1 / (1/16 + 9/16)
  CHECK(orthogonal.mean_delta_sq == Approx(1.0));
  // Orthogonal with unequal norms too, and three dcs.
  const torch::Tensor e3 = torch::tensor({0.0F, 0.0F, 1.0F});
  CHECK(round_of({e1 * 2.0, e2 * 0.5, e3}, {0.5, 1.0, 2.5}).rho == Approx(0.0).margin(1e-6));
  // Identical Δ_i: 1 under any weights.
  const torch::Tensor x = torch::tensor({0.3F, -1.2F, 0.7F});
  CHECK(round_of({x, x}, {1.0, 3.0}).rho == Approx(1.0).epsilon(1e-6));
  CHECK(round_of({x, x, x}, {0.25, 1.0, 4.0}).rho == Approx(1.0).epsilon(1e-6));
  // Opposite Δ_i of equal norm: Σ_{i≠j} p_i p_j ⟨Δ_i, Δ_j⟩ over Σ_{i≠j} p_i p_j ‖Δ‖² is −1.
  CHECK(round_of({x, -x}, {1.0, 3.0}).rho == Approx(-1.0).epsilon(1e-6));
  // All the weight on one dc: no pair to agree, NaN.
  CHECK(std::isnan(round_of({e1, e2}, {1.0, 0.0}).rho));
}

TEST_CASE("agreement with equal weights is DiLoCo's formula bit for bit", "[outer][adloco]") {
  torch::manual_seed(5);
  for (const int g : {2, 3, 5, 7}) {
    std::vector<torch::Tensor> deltas;
    for (int i = 0; i < g; ++i)
      deltas.push_back(torch::randn({101}) + 0.5);
    const RoundStats s = round_of(deltas, std::vector<double>(static_cast<size_t>(g), 1.0));
    // The unweighted statistics as the round computed them before token weights.
    double sum_sq = 0.0;
    for (const torch::Tensor& d : deltas) {
      const double norm = d.norm().item<double>();
      sum_sq += norm * norm;
    }
    const double mean_sq = sum_sq / g;
    CHECK(s.effective_dcs == static_cast<double>(g));
    CHECK(s.mean_delta_sq == mean_sq);
    CHECK(s.rho == (g * s.avg_delta_sq - mean_sq) / ((g - 1) * mean_sq));
  }
}

TEST_CASE("a cycle's agreement weighs every fragment's dcs as their syncs did",
          "[outer][fragments]") {
  // Two fragments of a model, two dcs with weights 1 and 3, pseudo-gradients orthogonal on
  // both: the whole model's ρ is 0 too.
  const torch::Tensor e1 = torch::tensor({1.0F, 0.0F});
  const torch::Tensor e2 = torch::tensor({0.0F, 1.0F});
  const RoundStats first = round_of({e1, e2}, {1.0, 3.0});
  const RoundStats last = round_of({e1 * 2.0, e2 * 2.0}, {1.0, 3.0});
  CycleStats cycle;
  cycle.add(first);
  const RoundStats whole = cycle.close(last);
  CHECK(whole.rho == Approx(0.0).margin(1e-6));
  CHECK(whole.mean_delta_sq == Approx(5.0));

  // Different weights per fragment (each from its own period's tokens): G_e from the sums.
  const RoundStats other = round_of({e1, e2 * 3.0}, {2.0, 1.0});
  cycle.add(other);
  CHECK(cycle.close(last).rho == Approx(0.0).margin(1e-6));

  // Equal weights: the cycle's ρ is the unweighted formula on the summed statistics, exactly.
  torch::manual_seed(3);
  const RoundStats a =
      round_of({torch::randn({33}), torch::randn({33}), torch::randn({33})}, {1.0, 1.0, 1.0});
  const RoundStats b =
      round_of({torch::randn({17}), torch::randn({17}), torch::randn({17})}, {1.0, 1.0, 1.0});
  cycle.add(a);
  const RoundStats equal = cycle.close(b);
  CHECK(equal.effective_dcs == 3.0);
  CHECK(equal.rho == RoundStats::agreement(3, a.mean_delta_sq + b.mean_delta_sq,
                                           a.avg_delta_sq + b.avg_delta_sq));
}

TEST_CASE("a cycle's statistics survive a checkpoint, and the layout before them still loads",
          "[outer][fragments][ckpt]") {
  const torch::Tensor e1 = torch::tensor({1.0F, 0.0F});
  const torch::Tensor e2 = torch::tensor({0.0F, 1.0F});
  RoundStats first = round_of({e1, e2}, {1.0, 3.0});
  first.link_s = 0.5;
  const RoundStats last = round_of({e1, e2 * 2.0}, {1.0, 3.0});
  CycleStats cycle;
  cycle.add(first);
  CycleStats resumed;
  resumed.load_state(cycle.state());
  const RoundStats expected = cycle.close(last);
  const RoundStats got = resumed.close(last);
  CHECK(got.rho == expected.rho);
  CHECK(got.effective_dcs == expected.effective_dcs);
  CHECK(got.sync_link_s == std::vector<double>{0.5, 0.0});

  // Before the weighted sums: Σ n̄, Σ a, Σ ‖Δ_i‖², bytes, then the link seconds. Equal weights
  // were all there was, and the cycle goes on with them.
  const RoundStats a = round_of({e1, e2}, {1.0, 1.0});
  const RoundStats b = round_of({e1 * 2.0, e2}, {1.0, 1.0});
  CycleStats legacy;
  legacy.load_state({a.mean_delta_sq, a.avg_delta_sq, 0.0, 0.0, 0.25});
  const RoundStats old = legacy.close(b);
  CHECK(old.rho == RoundStats::agreement(2, a.mean_delta_sq + b.mean_delta_sq,
                                         a.avg_delta_sq + b.avg_delta_sq));
  CHECK(old.sync_link_s == std::vector<double>{0.25, 0.0});
  CHECK_THROWS_AS(legacy.load_state({CycleStats::kStateLayout, 1.0, 2.0}), CheckpointError);
}

TEST_CASE("a checkpointed round message of the layout before the weighted sums still reads",
          "[outer][ckpt]") {
  // 2 dcs: weight, loss, Σ ‖Δ_i‖², Σ ‖Δ_i‖, tokens, S, seconds, then next batch and demand.
  const std::vector<double> legacy = {2.0, 3.0, 8.0, 4.0, 100.0, 0.1, 1.5, 2.0, 4.0, 1.0, -1.0};
  REQUIRE(legacy.size() == OuterSync::legacy_message_scalars(2));
  const std::vector<double> read = OuterSync::remap_scalars(legacy, TopologyChange{2, 2});
  REQUIRE(read.size() == OuterSync::message_scalars(2));
  CHECK(read[2] == 8.0);
  CHECK(read[7] == 8.0);  // Σ w_i² ‖Δ_i‖² = Σ ‖Δ_i‖² with the weights of 1 it was written with
  CHECK(std::vector<double>(read.begin() + 8, read.end()) ==
        std::vector<double>{2.0, 4.0, 1.0, -1.0});
  // Across a topology change 2 -> 3 dcs: new dc 2 continues dc 0.
  const std::vector<double> grown = OuterSync::remap_scalars(legacy, TopologyChange{2, 3});
  REQUIRE(grown.size() == OuterSync::message_scalars(3));
  CHECK(std::vector<double>(grown.begin() + 8, grown.end()) ==
        std::vector<double>{2.0, 4.0, 2.0, 1.0, -1.0, 1.0});
  // The current layout passes through; another length is left for the caller to refuse.
  std::vector<double> current = read;
  CHECK(OuterSync::remap_scalars(current, TopologyChange{2, 2}) == current);
  CHECK(OuterSync::remap_scalars({1.0, 2.0}, TopologyChange{2, 2}).size() == 2);
}
