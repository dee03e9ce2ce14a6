// interval.controller: schedule — H as a piecewise-constant function of the inner step
// (interval.schedule "STEP:H" entries; interval.H before the first). A reference for the
// adaptive rules and an oracle: what a controller would do if it knew the best H per stage.
#pragma once

#include "autoloco/sched/interval_controller.hpp"

namespace autoloco {

class ScheduleInterval final : public IntervalController {
 public:
  ScheduleInterval(int64_t H0, std::vector<IntervalChange> changes);
  std::string name() const override { return "schedule"; }
  std::string describe() const override;
  int64_t first_interval() const override { return at(0); }
  // The next round starts where this one ended.
  int64_t next_interval(const RoundStats& stats) override { return at(stats.step); }
  std::vector<double> state() const override { return {}; }
  void load_state(const std::vector<double>& state) override;

  // H of a round that starts after `step` inner steps.
  int64_t at(int64_t step) const;

 private:
  int64_t H0_;
  std::vector<IntervalChange> changes_;
};

}  // namespace autoloco
