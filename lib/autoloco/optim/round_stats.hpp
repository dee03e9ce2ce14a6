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
  int64_t H = 0;                 // inner steps of this round
  int dcs = 1;                   // G
  double loss = NAN;             // mean training loss over the round and all dcs
  double lr_sum = 0.0;           // S_k: accumulated inner lr of the round
  double tokens = 0.0;           // tokens of the round, all dcs
  double mean_delta_sq = 0.0;    // n̄ = mean_i ‖Δ_i‖²
  double mean_delta_norm = 0.0;  // mean_i ‖Δ_i‖
  double avg_delta_sq = 0.0;     // a = ‖Δ̄‖²
  double rho = NAN;              // agreement (G a − n̄) / ((G − 1) n̄), for G ≥ 2
  double round_s = 0.0;          // compute seconds of the round, mean over dcs
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

  // Mean pairwise cosine of the dcs' pseudo-gradients; NaN with one dc or Δ = 0.
  static double agreement(int dcs, double mean_delta_sq, double avg_delta_sq) {
    if (dcs < 2 || !(mean_delta_sq > 0.0)) return NAN;
    return (dcs * avg_delta_sq - mean_delta_sq) / ((dcs - 1) * mean_delta_sq);
  }
};

}  // namespace autoloco
