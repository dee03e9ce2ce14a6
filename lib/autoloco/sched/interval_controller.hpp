// The interval controller seam: how many inner steps the next round has. It sees only the
// round's statistics, which are identical on every rank, so every dc picks the same interval
// without another message. A new rule is one new implementation registered in
// make_interval_controller (docs/methods.md describes each).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/optim/round_stats.hpp"

namespace autoloco {

class IntervalController {
 public:
  virtual ~IntervalController() = default;
  virtual std::string name() const = 0;
  // One line for the start log: the rule and its settings.
  virtual std::string describe() const { return name(); }
  // Inner steps of the first round.
  virtual int64_t first_interval() const = 0;
  // Inner steps of the round after the one `stats` describes.
  virtual int64_t next_interval(const RoundStats& stats) = 0;
  // The controller's state as numbers, for checkpoints; load_state() takes back what state()
  // gave and throws CheckpointError on a mismatch.
  virtual std::vector<double> state() const = 0;
  virtual void load_state(const std::vector<double>& state) = 0;
  // Named figures of the last next_interval() for syncs.jsonl (wrappers add theirs).
  virtual std::vector<std::pair<std::string, double>> decision() const { return {}; }
};

// DiLoCo: H every round.
class FixedInterval final : public IntervalController {
 public:
  explicit FixedInterval(int64_t H) : H_(H) {}
  std::string name() const override { return "fixed"; }
  std::string describe() const override;
  int64_t first_interval() const override { return H_; }
  int64_t next_interval(const RoundStats&) override { return H_; }
  std::vector<double> state() const override { return {}; }
  void load_state(const std::vector<double>& state) override;

 private:
  int64_t H_;
};

// What the adaptive rules share: they start at H_0, hold it while the inner lr warms up (the
// statistics of warm-up rounds say little about later ones), and stay inside [H_min, H_max].
class AdaptiveInterval : public IntervalController {
 public:
  AdaptiveInterval(const IntervalConfig& interval, int64_t warmup_steps);
  int64_t first_interval() const override { return H0_; }
  int64_t next_interval(const RoundStats& stats) final;

 protected:
  // The rule proper, for a round that ended after warm-up; the result is clamped.
  virtual int64_t decide(const RoundStats& stats) = 0;
  int64_t clamp(int64_t H) const;
  std::string bounds() const;

  int64_t H0_;
  int64_t H_min_;
  int64_t H_max_;
  int64_t warmup_steps_;
};

// Throws CheckpointError unless `state` has `expected` values.
void check_state_size(const std::string& controller, const std::vector<double>& state,
                      size_t expected);

// By interval.controller (inner.warmup_steps and run.steps matter to some rules), wrapped in
// the round budget when interval.max_rounds > 0. Throws ConfigError for an unknown name.
std::unique_ptr<IntervalController> make_interval_controller(const Config& config);

}  // namespace autoloco
