// interval.controller: adacomm — AdaComm (Wang & Joshi, "Adaptive communication strategies to
// achieve the best error-runtime trade-off in local-update SGD", SysML 2019): the interval
// follows the training loss and the learning rate,
//   H_{k+1} = ceil(H_0 · sqrt(η_0 L_k / (η_k L_0))),
// with L_k and η_k the mean training loss and mean inner lr of round k, and (L_0, η_0) those of
// the first round after warm-up (the rule's reference point).
#pragma once

#include <cmath>

#include "autoloco/sched/interval_controller.hpp"

namespace autoloco {

class AdaCommInterval final : public AdaptiveInterval {
 public:
  AdaCommInterval(const IntervalConfig& interval, int64_t warmup_steps)
      : AdaptiveInterval(interval, warmup_steps) {}
  std::string name() const override { return "adacomm"; }
  std::string describe() const override;
  std::vector<double> state() const override { return {loss0_, lr0_}; }
  void load_state(const std::vector<double>& state) override;

 protected:
  int64_t decide(const RoundStats& stats) override;

 private:
  double loss0_ = NAN;  // NaN until the reference round
  double lr0_ = NAN;
};

}  // namespace autoloco
