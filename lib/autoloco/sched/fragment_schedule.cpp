#include "autoloco/sched/fragment_schedule.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

int64_t fragment_offset(int64_t p, int64_t P, int64_t H) {
  return p == 0 ? H : p * H / P;
}

FragmentSchedule::FragmentSchedule(int64_t fragments)
    : last_(static_cast<size_t>(fragments < 1 ? 1 : fragments), 0) {}

std::vector<int64_t> FragmentSchedule::due(int64_t step, int64_t H, bool last) const {
  const int64_t P = fragments();
  std::vector<int64_t> out;
  for (int64_t p = 1; p <= P; ++p) {
    const int64_t f = p % P;  // 1, ..., P − 1, then 0: the cycle's order
    const int64_t synced = last_[static_cast<size_t>(f)];
    if (synced >= step) continue;
    const bool in_turn = synced <= start_ && step - start_ >= fragment_offset(f, P, H);
    if (in_turn || last) out.push_back(f);
  }
  return out;
}

void FragmentSchedule::synced(int64_t p, int64_t step) {
  last_[static_cast<size_t>(p)] = step;
  if (p == 0) start_ = step;
}

void FragmentSchedule::restore(int64_t cycle_start, std::vector<int64_t> last_synced) {
  if (last_synced.size() != last_.size()) {
    throw CheckpointError(fmt::format(
        "the checkpoint's fragment schedule has {} fragments, the config {} (outer.fragments): "
        "resume with the outer.fragments it was written with",
        last_synced.size(), last_.size()));
  }
  start_ = cycle_start;
  last_ = std::move(last_synced);
}

}  // namespace autoloco
