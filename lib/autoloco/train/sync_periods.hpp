// The bookkeeping of fragment syncs (outer.fragments, sched/fragment_schedule): what each
// fragment's period (its steps since its last sync; with one fragment, the round) gathers for its
// message, and what the syncs of a cycle tell the interval controller together.
#pragma once

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

  // For checkpoints.
  std::vector<double> state() const;
  void load_state(const std::vector<double>& state);

 private:
  double mean_delta_sq_ = 0.0;
  double avg_delta_sq_ = 0.0;
  double mean_delta_norm_sq_ = 0.0;
  double dc_bytes_ = 0.0;
  std::vector<double> link_s_;
};

}  // namespace autoloco
