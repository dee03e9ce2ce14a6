// interval.controller: autoloco — this project's reading of AutoLoCo's adaptive interval
// (ALGORITHMS.md §2): a set-point on the per-step signal-to-noise of the round,
//   q_k = ρ_k / ((1 − ρ_k) H_k),
// which falls as H grows (negative feedback, unlike a rule on ρ itself). Its running average
// q̄ (weight interval.smoothing on the newest) is compared with the set-point q*:
//   q̄ > q*           H ← H · grow      (the dcs agree: they can run longer apart)
//   q̄ < band · q*    H ← H · shrink
// each change by at least one step, then interval.hold_rounds rounds without a decision. With
// interval.q_target 0, q* is q_auto_ratio times the mean q of the first q_auto_rounds rounds
// after warm-up (no decisions until then), so it adapts to model, batch and lr without a sweep.
// A mean q at or below 0 (dcs that disagree) would make a set-point that q̄ never falls below:
// it sets nothing, the log says so, and the next q_auto_rounds rounds try again.
#pragma once

#include <cmath>

#include "autoloco/sched/interval_controller.hpp"

namespace autoloco {

class AutoLoCoInterval final : public AdaptiveInterval {
 public:
  AutoLoCoInterval(const IntervalConfig& interval, int64_t warmup_steps);
  std::string name() const override { return "autoloco"; }
  std::string describe() const override;
  std::vector<double> state() const override;
  void load_state(const std::vector<double>& state) override;

  double q_target() const { return q_target_; }  // 0 until set (q_target 0)
  double q_smoothed() const { return q_smooth_; }
  // Windows of q_auto_rounds rounds (in this process) whose mean q could not set q*.
  int unset_windows() const { return unset_windows_; }

 protected:
  int64_t decide(const RoundStats& stats) override;

 private:
  // The multiplicative step, at least one inner step, clamped.
  int64_t step_towards(int64_t H, double factor) const;
  // q_target 0: one more round's q towards the window that sets q*.
  void set_target_from(double q, const RoundStats& stats);

  IntervalConfig cfg_;
  double q_target_;
  double q_smooth_ = NAN;
  double hold_left_ = 0;   // rounds still without a decision
  double auto_sum_ = 0.0;  // q_target 0: sum and count of the rounds that set q*
  double auto_count_ = 0;
  int unset_windows_ = 0;
};

}  // namespace autoloco
