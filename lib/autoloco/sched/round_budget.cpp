#include "autoloco/sched/round_budget.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace autoloco {

RoundBudget::RoundBudget(std::unique_ptr<IntervalController> inner, int64_t max_rounds,
                         int64_t total_steps)
    : inner_(std::move(inner)), max_rounds_(max_rounds), total_steps_(total_steps) {}

int64_t RoundBudget::needed(int64_t steps_left, int64_t rounds_left) {
  if (rounds_left <= 0) return steps_left;  // spent: the rest in one round
  return (steps_left + rounds_left - 1) / rounds_left;
}

int64_t RoundBudget::first_interval() const {
  return std::max(inner_->first_interval(), needed(total_steps_, max_rounds_));
}

int64_t RoundBudget::next_interval(const RoundStats& stats) {
  const int64_t H = inner_->next_interval(stats);
  const int64_t steps_left = total_steps_ - stats.step;
  if (steps_left <= 0) return H;
  return std::max(H, needed(steps_left, max_rounds_ - stats.round));
}

std::string RoundBudget::describe() const {
  return fmt::format("{}; budget {} rounds for {} steps", inner_->describe(), max_rounds_,
                     total_steps_);
}

}  // namespace autoloco
