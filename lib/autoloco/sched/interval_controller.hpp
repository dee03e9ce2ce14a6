// The interval controller seam: how many inner steps the next round has. It sees only the
// round's statistics, which are identical on every rank, so every dc picks the same interval
// without another message. A new rule is one new implementation registered in
// make_interval_controller.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/optim/round_stats.hpp"

namespace autoloco {

class IntervalController {
 public:
  virtual ~IntervalController() = default;
  virtual std::string name() const = 0;
  // Inner steps of the first round.
  virtual int64_t first_interval() const = 0;
  // Inner steps of the round after the one `stats` describes.
  virtual int64_t next_interval(const RoundStats& stats) = 0;
  // The controller's state as numbers, for checkpoints; load_state() takes back what state()
  // gave and throws CheckpointError on a mismatch.
  virtual std::vector<double> state() const = 0;
  virtual void load_state(const std::vector<double>& state) = 0;
};

// DiLoCo: H every round.
class FixedInterval final : public IntervalController {
 public:
  explicit FixedInterval(int64_t H) : H_(H) {}
  std::string name() const override { return "fixed"; }
  int64_t first_interval() const override { return H_; }
  int64_t next_interval(const RoundStats&) override { return H_; }
  std::vector<double> state() const override { return {}; }
  void load_state(const std::vector<double>& state) override;

 private:
  int64_t H_;
};

// By interval.controller. Throws ConfigError for an unknown name.
std::unique_ptr<IntervalController> make_interval_controller(const IntervalConfig& interval);

}  // namespace autoloco
