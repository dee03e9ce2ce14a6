// The statistics of one round (ALGORITHMS.md §2), identical on every rank: the outer optimizer
// and the interval controller read them, syncs.jsonl records them.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace autoloco {

struct RoundStats {
  int64_t round = 0;     // 1-based index of the round just finished
  int64_t fragment = 0;  // the fragment synced (outer.fragments > 1), else 0
  // Training progress when it ended, in inner steps at the initial batch (world tokens done /
  // world tokens per step of the first round): the clock of every schedule. It is the inner
  // step count whenever the batch is fixed.
  int64_t step = 0;
  int64_t H = 0;        // inner steps of this round
  int dcs = 1;          // G
  double loss = NAN;    // mean training loss over the round and all dcs
  double lr_sum = 0.0;  // S_k: accumulated inner lr of the round
  double tokens = 0.0;  // tokens of the round, all dcs
  // n̄ = Σ_i p_i ‖Δ_i‖² with the dcs' token weights p_i = w_i / Σ_j w_j (so mean_i ‖Δ_i‖²
  // when batches are equal).
  double mean_delta_sq = 0.0;
  double mean_delta_norm = 0.0;  // mean_i ‖Δ_i‖
  double avg_delta_sq = 0.0;     // a = ‖Δ̄‖², Δ̄ = Σ_i p_i Δ_i
  // G_e = n̄ / Σ_i p_i² ‖Δ_i‖²: how many dcs the weighted average effectively holds; G when
  // batches are equal (see agreement()).
  double effective_dcs = NAN;
  double rho = NAN;      // agreement (G_e a − n̄) / ((G_e − 1) n̄), for G ≥ 2
  double round_s = 0.0;  // compute seconds of the round, mean over dcs
  // The WAN model's link seconds of the round's all-reduce: the same on every rank, so the
  // controllers plan with it in every wan.mode.
  double link_s = 0.0;
  // wan.mode real: this rank's measured seconds of the all-reduce (NaN otherwise).
  double measured_link_s = NAN;
  // The link seconds the run's clock takes for the round: the measured ones where there are.
  double clock_link_s() const { return std::isnan(measured_link_s) ? link_s : measured_link_s; }
  // With fragments, the link seconds of each of the cycle's syncs (empty: the one, link_s).
  std::vector<double> sync_link_s;
  int64_t dc_bytes = 0;            // bytes of one dc's message in the round
  int64_t sent_bytes = 0;          // bytes all dcs sent over the link in the round
  std::vector<double> next_batch;  // per dc: sequences per rank of the next round
  std::vector<double> demand;      // per dc: what its batch test asked for (NaN: none)

  // η̄_k = S_k / H_k, the round's mean inner learning rate.
  double mean_lr() const { return H > 0 ? lr_sum / static_cast<double>(H) : 0.0; }

  // Per-step signal-to-noise q = ρ / ((1 − ρ) H): removes ρ's growth with H. NaN without ρ.
  double q() const {
    if (std::isnan(rho) || H <= 0) return NAN;
    if (rho >= 1.0) return INFINITY;
    return rho / ((1.0 - rho) * static_cast<double>(H));
  }

  // n̄ and G_e from a round message's sums over the dcs (OuterSync): Σ w_i, Σ w_i ‖Δ_i‖² and
  // Σ w_i² ‖Δ_i‖², the weights w_i in any unit: n̄ = Σ w_i ‖Δ_i‖² / Σ w_i and
  // G_e = n̄ / Σ p_i² ‖Δ_i‖² = Σ w_i · (Σ w_i ‖Δ_i‖² / Σ w_i² ‖Δ_i‖²). With every weight 1, Σ w_i
  // is G exactly and the ratio exactly 1: n̄ and G_e are mean_i ‖Δ_i‖² and G, bit for bit.
  void set_delta_sums(double weights, double weighted_sq, double weight_squared_sq) {
    mean_delta_sq = weighted_sq / weights;
    effective_dcs = weights * (weighted_sq / weight_squared_sq);
  }

  // The agreement of the dcs' pseudo-gradients under token weights p_i (Σ p_i = 1): the
  // weighted mean of their pairwise inner products over that of their mean squared norms,
  //   ρ = Σ_{i≠j} p_i p_j ⟨Δ_i, Δ_j⟩ / Σ_{i≠j} p_i p_j (‖Δ_i‖² + ‖Δ_j‖²) / 2.
  // With n̄ = Σ p_i ‖Δ_i‖² and P = Σ p_i² ‖Δ_i‖², a = ‖Σ p_i Δ_i‖² = P + Σ_{i≠j} p_i p_j ⟨Δ_i, Δ_j⟩
  // and the denominator is n̄ − P, so ρ = (a − P) / (n̄ − P) = (G_e a − n̄) / ((G_e − 1) n̄)
  // with G_e = n̄ / P. It is 0 for orthogonal Δ_i and 1 for identical ones whatever the
  // weights, and with equal weights (P = n̄ / G, G_e = G) it is the mean pairwise cosine of
  // DiLoCo's statistics, (G a − n̄) / ((G − 1) n̄), computed by the same operations. NaN with one
  // dc, Δ = 0, or all the weight on one dc.
  static double agreement(int dcs, double effective_dcs, double mean_delta_sq,
                          double avg_delta_sq) {
    if (dcs < 2 || !(mean_delta_sq > 0.0) || !(effective_dcs > 1.0)) return NAN;
    return (effective_dcs * avg_delta_sq - mean_delta_sq) / ((effective_dcs - 1) * mean_delta_sq);
  }
  // Equal weights: G_e = G.
  static double agreement(int dcs, double mean_delta_sq, double avg_delta_sq) {
    return agreement(dcs, static_cast<double>(dcs), mean_delta_sq, avg_delta_sq);
  }
};

}  // namespace autoloco
