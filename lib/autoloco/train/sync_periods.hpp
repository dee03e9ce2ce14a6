// The bookkeeping of fragment syncs (outer.fragments, sched/fragment_schedule): what each
// fragment's period (its steps since its last sync; with one fragment, the round) gathers for its
// message, and what the syncs of a cycle tell the interval controller together.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "autoloco/optim/round_stats.hpp"

namespace autoloco {

struct SyncPeriod {
  int64_t steps = 0;
  double loss_sum = 0.0;  // this rank's training losses
  double lr_sum = 0.0;    // S: the inner lr summed over the steps
  int64_t sequences = 0;  // the dc's sequences per rank and step, summed over the steps
  double start_compute_s = 0.0;
};

// The syncs of the current cycle that landed before its last one (fragment 0's, at the cycle's
// end). The controller sees the cycle as one round: fragment 0's statistics (its period is the
// cycle: loss, lr, H, compute seconds) with every fragment's ‖Δ‖², link seconds and bytes, so
// that ρ and the link time describe the whole model. With one fragment it passes the round's
// statistics through unchanged.
class CycleStats {
 public:
  void add(const RoundStats& fragment_sync);
  // The cycle's statistics, `last` being its fragment 0 sync; starts the next cycle.
  RoundStats close(const RoundStats& last);

  // For checkpoints: a leading kStateLayout (negative, which the first value of the layout
  // before it, a sum of squares, never is), then the sums and the link seconds.
  static constexpr double kStateLayout = -2.0;
  std::vector<double> state() const;
  void load_state(const std::vector<double>& state);

 private:
  // One more sync's weighted n̄ and its G_e (RoundStats::agreement) into the sums.
  void add_weighted(double mean_delta_sq, double effective_dcs);

  double mean_delta_sq_ = 0.0;  // Σ n̄ of the syncs
  double avg_delta_sq_ = 0.0;
  double mean_delta_norm_sq_ = 0.0;
  double dc_bytes_ = 0.0;
  // Σ P = Σ n̄ / G_e of the syncs (NaN after a checkpoint without it: taken as n̄ / the last
  // sync's G_e), and their common G_e: NaN while none, kMixedDcs once two differ. With equal G_e
  // the cycle's is that one exactly, so that equal weights keep DiLoCo's ρ bit for bit.
  static constexpr double kMixedDcs = -1.0;
  double self_delta_sq_ = 0.0;
  double effective_dcs_ = NAN;
  std::vector<double> link_s_;
};

}  // namespace autoloco
