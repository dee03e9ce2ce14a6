#include "autoloco/sched/interval_controller.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "autoloco/sched/adacomm_interval.hpp"
#include "autoloco/sched/autoloco_interval.hpp"
#include "autoloco/sched/link_aware_interval.hpp"
#include "autoloco/sched/qsr_interval.hpp"
#include "autoloco/sched/round_budget.hpp"
#include "autoloco/sched/schedule_interval.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

void check_state_size(const std::string& controller, const std::vector<double>& state,
                      size_t expected) {
  if (state.size() != expected) {
    throw CheckpointError(fmt::format(
        "the {} interval controller keeps {} state values, but the checkpoint holds {}: was it "
        "written with another interval.controller?",
        controller, expected, state.size()));
  }
}

std::string FixedInterval::describe() const {
  return fmt::format("fixed: H {}", H_);
}

void FixedInterval::load_state(const std::vector<double>& state) {
  check_state_size(name(), state, 0);
}

AdaptiveInterval::AdaptiveInterval(const IntervalConfig& interval, int64_t warmup_steps)
    : H0_(interval.H),
      H_min_(interval.H_min),
      H_max_(interval.H_max),
      warmup_steps_(warmup_steps) {}

int64_t AdaptiveInterval::next_interval(const RoundStats& stats) {
  if (stats.step <= warmup_steps_) return H0_;
  return clamp(decide(stats));
}

int64_t AdaptiveInterval::clamp(int64_t H) const {
  return std::clamp(H, H_min_, H_max_);
}

std::string AdaptiveInterval::bounds() const {
  return fmt::format("H_0 {} (held through {} warm-up steps), H in [{}, {}]", H0_, warmup_steps_,
                     H_min_, H_max_);
}

std::unique_ptr<IntervalController> make_interval_controller(const Config& config) {
  const IntervalConfig& interval = config.interval;
  const int64_t warmup = config.inner.warmup_steps;
  std::unique_ptr<IntervalController> c;
  if (interval.controller == "fixed") {
    c = std::make_unique<FixedInterval>(interval.H);
  } else if (interval.controller == "schedule") {
    c = std::make_unique<ScheduleInterval>(interval.H, parse_interval_schedule(interval));
  } else if (interval.controller == "adacomm") {
    c = std::make_unique<AdaCommInterval>(interval, warmup);
  } else if (interval.controller == "qsr") {
    c = std::make_unique<QsrInterval>(interval, warmup);
  } else if (interval.controller == "autoloco") {
    c = std::make_unique<AutoLoCoInterval>(interval, warmup);
  } else {
    throw ConfigError(fmt::format("config key interval.controller: unknown controller '{}'",
                                  interval.controller));
  }
  if (interval.max_rounds > 0) {
    c = std::make_unique<RoundBudget>(std::move(c), interval.max_rounds, config.run.steps);
  }
  if (interval.target_utilisation > 0.0) {
    c = std::make_unique<LinkAwareInterval>(std::move(c), interval.target_utilisation,
                                            config.outer.overlap_steps, config.run.steps);
  }
  return c;
}

}  // namespace autoloco
