// The batch controller seam (DESIGN.md): the batch of each dc's next round, in sequences per
// rank, and how one step's batch is cut into equal micro-batches. Each dc decides for itself
// from its own gradient samples (so dcs may run different batches); the decision is made at a
// round's end and holds for the whole next round. A new rule is one new implementation
// registered in make_batch_controller (docs/methods.md describes each).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/sched/gradient_noise.hpp"

namespace autoloco {

// One inner step of one rank: `accum` micro-batches of `micro_batch` sequences.
struct BatchPlan {
  int64_t batch = 0;  // accum * micro_batch
  int64_t micro_batch = 0;
  int64_t accum = 0;
};

// The fewest equal micro-batches of at most `max_micro` sequences that hold `batch`, their
// count a multiple of `samples_per_rank` (each sample is a whole number of micro-batches); the
// batch is rounded up to accum * micro_batch.
BatchPlan plan_batch(int64_t batch, int64_t max_micro, int64_t samples_per_rank);

// What the round's test asked for and what the controller chose.
struct BatchDecision {
  int64_t batch = 0;    // sequences per rank of the next round
  double demand = NAN;  // sequences per rank the test asked for (NaN: no test, or no answer)
};

class BatchController {
 public:
  virtual ~BatchController() = default;
  virtual std::string name() const = 0;
  virtual std::string describe() const = 0;
  // Whether the trainer must measure gradient samples for next_batch().
  virtual bool needs_samples() const = 0;
  // The current round's step plan.
  virtual BatchPlan plan() const = 0;
  // The next round's batch from this round's sums over the dc's samples.
  virtual BatchDecision next_batch(const NoiseSums& sums) = 0;
  // Multi-instance training: this instance takes over a merged one's batch (the sum of both,
  // as planned: absorbed() says what absorb() will make of it without changing anything).
  virtual void absorb(int64_t other_batch) = 0;
  virtual int64_t absorbed(int64_t other_batch) const = 0;
  // For checkpoints: load_state() takes back what state() gave, throws CheckpointError if not.
  virtual std::vector<double> state() const = 0;
  virtual void load_state(const std::vector<double>& state) = 0;
};

// data.batch_size sequences per micro-batch, data.grad_accum micro-batches, every round.
class FixedBatch final : public BatchController {
 public:
  explicit FixedBatch(const DataConfig& data);
  std::string name() const override { return "fixed"; }
  std::string describe() const override;
  bool needs_samples() const override { return false; }
  BatchPlan plan() const override { return plan_; }
  BatchDecision next_batch(const NoiseSums&) override { return {plan_.batch, NAN}; }
  void absorb(int64_t other_batch) override;
  int64_t absorbed(int64_t other_batch) const override { return plan_.batch + other_batch; }
  std::vector<double> state() const override { return {}; }
  void load_state(const std::vector<double>& state) override;

 private:
  BatchPlan plan_;
};

// Gradient samples per dc and per rank: one per member, or (a dc of one rank) two halves of
// the rank's batch, so that a dc always has at least two.
struct SampleLayout {
  int64_t per_dc = 1;
  int64_t per_rank = 1;
  static SampleLayout for_dc(int64_t ranks_per_dc);
};

// By batch.controller; `ranks_per_dc` fixes the sample layout. Throws ConfigError.
std::unique_ptr<BatchController> make_batch_controller(const Config& config, int64_t ranks_per_dc);

}  // namespace autoloco
