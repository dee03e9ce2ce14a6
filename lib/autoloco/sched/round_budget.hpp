// interval.max_rounds: a budget of rounds for the whole run around any controller. After each
// round the next interval is at least ceil(steps left / rounds left), so that the run ends within
// the budget whatever the controller asks (beyond H_max if need be: the budget wins).
#pragma once

#include "autoloco/sched/interval_controller.hpp"

namespace autoloco {

class RoundBudget final : public IntervalController {
 public:
  RoundBudget(std::unique_ptr<IntervalController> inner, int64_t max_rounds, int64_t total_steps);
  std::string name() const override { return inner_->name(); }
  std::string describe() const override;
  int64_t first_interval() const override;
  int64_t next_interval(const RoundStats& stats) override;
  std::vector<double> state() const override { return inner_->state(); }
  void load_state(const std::vector<double>& state) override { inner_->load_state(state); }
  std::vector<std::pair<std::string, double>> decision() const override {
    return inner_->decision();
  }

 private:
  // The shortest interval that still fits `steps_left` steps into `rounds_left` rounds.
  static int64_t needed(int64_t steps_left, int64_t rounds_left);

  std::unique_ptr<IntervalController> inner_;
  int64_t max_rounds_;
  int64_t total_steps_;
};

}  // namespace autoloco
