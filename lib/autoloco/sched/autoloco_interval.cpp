#include "autoloco/sched/autoloco_interval.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "autoloco/util/log.hpp"

namespace autoloco {

AutoLoCoInterval::AutoLoCoInterval(const IntervalConfig& interval, int64_t warmup_steps)
    : AdaptiveInterval(interval, warmup_steps), cfg_(interval), q_target_(interval.q_target) {}

int64_t AutoLoCoInterval::step_towards(int64_t H, double factor) const {
  const auto scaled = static_cast<int64_t>(std::llround(static_cast<double>(H) * factor));
  return clamp(factor > 1.0 ? std::max(H + 1, scaled) : std::min(H - 1, scaled));
}

void AutoLoCoInterval::set_target_from(double q, const RoundStats& s) {
  auto_sum_ += q;
  auto_count_ += 1;
  if (auto_count_ < static_cast<double>(cfg_.q_auto_rounds)) return;
  const double mean = auto_sum_ / auto_count_;
  auto_sum_ = 0.0;
  auto_count_ = 0;
  if (mean > 0.0) {
    q_target_ = cfg_.q_auto_ratio * mean;
    log::info("autoloco: q* = {:.4g} at round {} ({} x the mean q {:.4g} of its last {} rounds)",
              q_target_, s.round, cfg_.q_auto_ratio, mean, cfg_.q_auto_rounds);
    return;
  }
  // A set-point at or below 0 would never be crossed from below: H would stay where it is, a
  // fixed interval in disguise. The dcs disagree on average (ρ ≤ 0) so far; wait for rounds
  // that agree, and say so.
  q_target_ = 0.0;
  ++unset_windows_;
  log::info(
      "autoloco: at round {} the mean q of the last {} rounds is {:.4g} <= 0 (the dcs' "
      "pseudo-gradients do not agree), which sets no q*: H stays {} and the next {} rounds try "
      "again (interval.q_target sets q* directly)",
      s.round, cfg_.q_auto_rounds, mean, s.H, cfg_.q_auto_rounds);
}

int64_t AutoLoCoInterval::decide(const RoundStats& s) {
  const double q = s.q();
  if (!std::isfinite(q)) return s.H;  // one dc, or Δ = 0: no signal
  q_smooth_ = std::isnan(q_smooth_) ? q : cfg_.smoothing * q + (1.0 - cfg_.smoothing) * q_smooth_;
  if (q_target_ <= 0.0) {
    set_target_from(q, s);
    return s.H;
  }
  if (hold_left_ > 0) {
    hold_left_ -= 1;
    return s.H;
  }
  int64_t next = s.H;
  if (q_smooth_ > q_target_) {
    next = step_towards(s.H, cfg_.grow);
  } else if (q_smooth_ < cfg_.band * q_target_) {
    next = step_towards(s.H, cfg_.shrink);
  }
  if (next != s.H) hold_left_ = static_cast<double>(cfg_.hold_rounds);
  return next;
}

std::string AutoLoCoInterval::describe() const {
  const std::string target =
      q_target_ > 0.0 ? fmt::format("q* {}", q_target_)
                      : fmt::format("q* = {} x mean q of the first {} rounds after warm-up",
                                    cfg_.q_auto_ratio, cfg_.q_auto_rounds);
  return fmt::format(
      "autoloco: {}, H x{} while q > q*, x{} while q < {} q*, hold {} rounds, smoothing {}, {}",
      target, cfg_.grow, cfg_.shrink, cfg_.band, cfg_.hold_rounds, cfg_.smoothing, bounds());
}

std::vector<double> AutoLoCoInterval::state() const {
  return {q_target_, q_smooth_, hold_left_, auto_sum_, auto_count_};
}

void AutoLoCoInterval::load_state(const std::vector<double>& state) {
  check_state_size(name(), state, 5);
  q_target_ = state[0];
  q_smooth_ = state[1];
  hold_left_ = state[2];
  auto_sum_ = state[3];
  auto_count_ = state[4];
}

}  // namespace autoloco
