#include "autoloco/sched/interval_controller.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

void FixedInterval::load_state(const std::vector<double>& state) {
  if (!state.empty()) {
    throw CheckpointError(fmt::format(
        "the fixed interval controller has no state, but the checkpoint holds {} values",
        state.size()));
  }
}

std::unique_ptr<IntervalController> make_interval_controller(const IntervalConfig& interval) {
  if (interval.controller == "fixed") return std::make_unique<FixedInterval>(interval.H);
  throw ConfigError(
      fmt::format("config key interval.controller: unknown controller '{}'", interval.controller));
}

}  // namespace autoloco
