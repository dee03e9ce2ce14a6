// interval.check_consistency: every rank must take the same decisions from a round's
// statistics; one all-gather per round checks it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

void Trainer::check_round_consistency(const RoundStats& s) {
  const OuterOptimizer& outer = sync_->outer().last_optimizer();
  const std::vector<double> mine = {static_cast<double>(H_), outer.last_lr(), outer.last_momentum(),
                                    s.loss, s.rho};
  std::vector<double> all(mine.size() * static_cast<size_t>(topo_.world_size));
  world_comm_->allgather(mine.data(), all.data(), mine.size(), DType::f64);
  for (int r = 0; r < topo_.world_size; ++r) {
    const double* theirs = all.data() + static_cast<size_t>(r) * mine.size();
    if (std::equal(mine.begin(), mine.end(), theirs,
                   [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); })) {
      continue;
    }
    throw CommError(fmt::format(
        "interval.check_consistency: after round {} ranks disagree: rank {} chose H {} with outer "
        "lr {} and momentum {} (loss {}, rho {}), rank {} chose H {} with outer lr {} and "
        "momentum {} (loss {}, rho {}). The round's statistics must be identical on every rank: "
        "report this with both ranks' logs",
        s.round, topo_.world_rank, mine[0], mine[1], mine[2], mine[3], mine[4], r, theirs[0],
        theirs[1], theirs[2], theirs[3], theirs[4]));
  }
}

void Trainer::check_sync_order(int64_t fragment) {
  // A rank that issues another fragment's collective than its peers deadlocks the link (torchft
  // #206); checked before the sync starts, on the main thread's own communicator.
  const std::vector<double> mine = {static_cast<double>(step_), static_cast<double>(fragment)};
  std::vector<double> all(mine.size() * static_cast<size_t>(topo_.world_size));
  world_comm_->allgather(mine.data(), all.data(), mine.size(), DType::f64);
  for (int r = 0; r < topo_.world_size; ++r) {
    const double* theirs = all.data() + static_cast<size_t>(r) * mine.size();
    if (std::equal(mine.begin(), mine.end(), theirs)) continue;
    throw CommError(fmt::format(
        "interval.check_consistency: rank {} is about to sync fragment {} after step {}, rank {} "
        "fragment {} after step {}: their collectives would not match and the link would hang. "
        "The fragment schedule must be identical on every rank: report this with both ranks' "
        "logs",
        topo_.world_rank, mine[1], mine[0], r, theirs[1], theirs[0]));
  }
}

}  // namespace autoloco
