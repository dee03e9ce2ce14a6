// batch.controller: adloco — AdLoCo's adaptive batch (ALGORITHMS.md §3). At each round's end the
// dc's gradient samples of the round answer batch.test (norm or inner_product): the batch that
// keeps the batch gradient's error within its thresholds. The batch only grows: to that demand,
// at most by batch.max_growth per round and to batch.max_batch sequences per rank. Above
// batch.max_micro_batch a step accumulates equal micro-batches (switch mode).
#pragma once

#include "autoloco/sched/batch_controller.hpp"

namespace autoloco {

class AdLoCoBatch final : public BatchController {
 public:
  AdLoCoBatch(const BatchConfig& batch, const DataConfig& data, SampleLayout samples);
  std::string name() const override { return "adloco"; }
  std::string describe() const override;
  bool needs_samples() const override { return true; }
  BatchPlan plan() const override { return plan_; }
  BatchDecision next_batch(const NoiseSums& sums) override;
  void absorb(int64_t other_batch) override;
  int64_t absorbed(int64_t other_batch) const override;
  std::vector<double> state() const override;
  void load_state(const std::vector<double>& state) override;

  // Sequences per sample that the configured test asks for (NaN: no answer).
  double demand_per_sample(const NoiseSums& sums) const;

 private:
  BatchConfig cfg_;
  int64_t max_micro_;
  SampleLayout samples_;
  BatchPlan plan_;
};

}  // namespace autoloco
