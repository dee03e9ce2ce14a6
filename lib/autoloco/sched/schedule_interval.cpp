#include "autoloco/sched/schedule_interval.hpp"

#include <fmt/format.h>

namespace autoloco {

ScheduleInterval::ScheduleInterval(int64_t H0, std::vector<IntervalChange> changes)
    : H0_(H0), changes_(std::move(changes)) {}

int64_t ScheduleInterval::at(int64_t step) const {
  int64_t H = H0_;
  for (const IntervalChange& c : changes_) {
    if (step >= c.step) H = c.H;
  }
  return H;
}

std::string ScheduleInterval::describe() const {
  std::string text = fmt::format("schedule: H {}", H0_);
  for (const IntervalChange& c : changes_)
    text += fmt::format(", {} from step {}", c.H, c.step);
  return text;
}

void ScheduleInterval::load_state(const std::vector<double>& state) {
  check_state_size(name(), state, 0);
}

}  // namespace autoloco
