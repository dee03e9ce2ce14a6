// interval.controller: qsr — the Quadratic Synchronization Rule (Gu, Lyu, Arora, Huang, "A
// quadratic synchronization rule for distributed deep learning", ICLR 2024): as the learning rate
// decays the interval grows as its inverse square,
//   H_{k+1} = max(H_0, floor((α / η_k)²)),
// with η_k the mean inner lr of round k and α = interval.qsr_alpha.
#pragma once

#include "autoloco/sched/interval_controller.hpp"

namespace autoloco {

class QsrInterval final : public AdaptiveInterval {
 public:
  QsrInterval(const IntervalConfig& interval, int64_t warmup_steps)
      : AdaptiveInterval(interval, warmup_steps), alpha_(interval.qsr_alpha) {}
  std::string name() const override { return "qsr"; }
  std::string describe() const override;
  std::vector<double> state() const override { return {}; }
  void load_state(const std::vector<double>& state) override;

 protected:
  int64_t decide(const RoundStats& stats) override;

 private:
  double alpha_;
};

}  // namespace autoloco
