// When each fragment syncs (Streaming DiLoCo, ALGORITHMS.md §4). A cycle is one interval of H
// inner steps; fragment p > 0 syncs floor(p H / P) steps into it and fragment 0 at its end, so
// the P syncs of a cycle are staggered about H/P apart and, for P = 1, the cycle is DiLoCo's
// round. The Trainer passes the cycle's current H at every step (an overlapped round's late
// decision may still change it before the cycle's first fragment sync); the run's end syncs
// every fragment that trained since its last sync, fragment 0 last.
#pragma once

#include <cstdint>
#include <vector>

namespace autoloco {

// Steps into a cycle of H steps at which fragment p of P syncs: floor(p H / P) for p > 0, H
// for p = 0.
int64_t fragment_offset(int64_t p, int64_t P, int64_t H);

class FragmentSchedule {
 public:
  explicit FragmentSchedule(int64_t fragments);

  int64_t fragments() const { return static_cast<int64_t>(last_.size()); }
  // The current cycle started after inner step `step` (0 at the run's start).
  int64_t cycle_start() const { return start_; }

  // Fragments that sync after inner step `step` of a cycle of H steps, in the order their syncs
  // are issued; `last`: the run ends with this step.
  std::vector<int64_t> due(int64_t step, int64_t H, bool last) const;
  // Fragment p's sync was issued after inner step `step`; fragment 0's ends the cycle.
  void synced(int64_t p, int64_t step);

  // The step each fragment last synced after (0: not yet): its period is the steps since.
  const std::vector<int64_t>& last_synced() const { return last_; }
  // As a checkpoint kept them.
  void restore(int64_t cycle_start, std::vector<int64_t> last_synced);

 private:
  int64_t start_ = 0;
  std::vector<int64_t> last_;
};

}  // namespace autoloco
