// interval.target_utilisation (ALGORITHMS.md §4, link-aware interval): a floor under any
// controller so that the interval follows the link and the machine. With t the round's compute
// seconds per inner step, T_i the link seconds of each of its syncs (one per fragment) and τ the
// overlapped steps, the syncs expose E = Σ_i max(0, T_i − τ t); compute utilisation of a round
// of H steps is H t / (H t + E), so a target u* needs H ≥ u* E / ((1 − u*) t).
#pragma once

#include <memory>
#include <vector>

#include "autoloco/sched/interval_controller.hpp"

namespace autoloco {

// Link seconds that no compute covered: Σ_i max(0, T_i − τ t).
double exposed_link_seconds(const std::vector<double>& sync_link_s, int64_t tau, double step_s);
// The smallest H whose utilisation H t / (H t + E) reaches `target` (0 when nothing is
// exposed or t is unknown).
int64_t utilisation_floor(double target, double step_s, double exposed_s);

class LinkAwareInterval final : public IntervalController {
 public:
  // `max_H`: no floor beyond it (the run's length).
  LinkAwareInterval(std::unique_ptr<IntervalController> inner, double target, int64_t tau,
                    int64_t max_H);
  std::string name() const override { return inner_->name(); }
  std::string describe() const override;
  int64_t first_interval() const override { return inner_->first_interval(); }
  int64_t next_interval(const RoundStats& stats) override;
  std::vector<double> state() const override { return inner_->state(); }
  void load_state(const std::vector<double>& state) override { inner_->load_state(state); }
  std::vector<std::pair<std::string, double>> decision() const override;

 private:
  std::unique_ptr<IntervalController> inner_;
  double target_;
  int64_t tau_;
  int64_t max_H_;
  // The last decision, for syncs.jsonl.
  double step_s_ = 0.0;
  double exposed_s_ = 0.0;
  int64_t asked_ = 0;  // what the wrapped controller asked
  int64_t floor_ = 0;
};

}  // namespace autoloco
