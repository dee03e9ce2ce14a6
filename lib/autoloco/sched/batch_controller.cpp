#include "autoloco/sched/batch_controller.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "autoloco/sched/adloco_batch.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

BatchPlan plan_batch(int64_t batch, int64_t max_micro, int64_t samples_per_rank) {
  int64_t accum = (batch + max_micro - 1) / max_micro;
  accum = (accum + samples_per_rank - 1) / samples_per_rank * samples_per_rank;
  const int64_t micro = (batch + accum - 1) / accum;
  return {accum * micro, micro, accum};
}

FixedBatch::FixedBatch(const DataConfig& data)
    : plan_{data.batch_size * data.grad_accum, data.batch_size, data.grad_accum} {}

std::string FixedBatch::describe() const {
  return fmt::format("fixed: {} sequences per rank ({} x {})", plan_.batch, plan_.accum,
                     plan_.micro_batch);
}

void FixedBatch::absorb(int64_t) {
  // Validation allows batch.instances > 1 only with an adaptive batch.
  throw ConfigError("config key batch.instances: merging instances needs batch.controller adloco");
}

void FixedBatch::load_state(const std::vector<double>& state) {
  if (!state.empty()) {
    throw CheckpointError(fmt::format(
        "the fixed batch controller keeps no state, but the checkpoint holds {} values: was it "
        "written with another batch.controller?",
        state.size()));
  }
}

SampleLayout SampleLayout::for_dc(int64_t ranks_per_dc) {
  return ranks_per_dc >= 2 ? SampleLayout{ranks_per_dc, 1} : SampleLayout{2, 2};
}

std::unique_ptr<BatchController> make_batch_controller(const Config& config, int64_t ranks_per_dc) {
  const BatchConfig& batch = config.batch;
  if (batch.controller == "fixed") return std::make_unique<FixedBatch>(config.data);
  if (batch.controller == "adloco") {
    return std::make_unique<AdLoCoBatch>(batch, config.data, SampleLayout::for_dc(ranks_per_dc));
  }
  throw ConfigError(
      fmt::format("config key batch.controller: unknown controller '{}'", batch.controller));
}

}  // namespace autoloco
