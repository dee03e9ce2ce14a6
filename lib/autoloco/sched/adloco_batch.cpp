#include "autoloco/sched/adloco_batch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "autoloco/util/error.hpp"

namespace autoloco {

AdLoCoBatch::AdLoCoBatch(const BatchConfig& batch, const DataConfig& data, SampleLayout samples)
    : cfg_(batch),
      max_micro_(batch.max_micro_batch > 0 ? batch.max_micro_batch : data.batch_size),
      samples_(samples),
      plan_(plan_batch(data.batch_size * data.grad_accum, max_micro_, samples.per_rank)) {}

std::string AdLoCoBatch::describe() const {
  const std::string test = cfg_.test == "norm" ? fmt::format("norm test theta {}", cfg_.theta)
                                               : fmt::format("inner-product test nu {} vartheta {}",
                                                             cfg_.nu, cfg_.vartheta);
  return fmt::format(
      "adloco: {}, {} gradient samples per dc; from {} sequences per rank ({} x {}), growing at "
      "most x{} per round to {}; micro-batches of at most {}; lr scaling {}",
      test, samples_.per_dc, plan_.batch, plan_.accum, plan_.micro_batch, cfg_.max_growth,
      cfg_.max_batch, max_micro_, cfg_.lr_scaling);
}

double AdLoCoBatch::demand_per_sample(const NoiseSums& sums) const {
  const int64_t per_sample = plan_.batch / samples_.per_rank;
  if (cfg_.test == "norm") return norm_test_batch(sums, samples_.per_dc, per_sample, cfg_.theta);
  return inner_product_test_batch(sums, samples_.per_dc, per_sample, cfg_.nu, cfg_.vartheta);
}

BatchDecision AdLoCoBatch::next_batch(const NoiseSums& sums) {
  BatchDecision d;
  d.demand = demand_per_sample(sums) * static_cast<double>(samples_.per_rank);
  int64_t want = plan_.batch;
  if (std::isfinite(d.demand) && d.demand > static_cast<double>(plan_.batch)) {
    const double grown = std::ceil(static_cast<double>(plan_.batch) * cfg_.max_growth);
    const double capped =
        std::min({std::ceil(d.demand), grown, static_cast<double>(cfg_.max_batch)});
    want = std::max(plan_.batch, static_cast<int64_t>(capped));
  }
  if (want != plan_.batch) plan_ = plan_batch(want, max_micro_, samples_.per_rank);
  d.batch = plan_.batch;
  return d;
}

void AdLoCoBatch::absorb(int64_t other_batch) {
  plan_ = plan_batch(absorbed(other_batch), max_micro_, samples_.per_rank);
}

int64_t AdLoCoBatch::absorbed(int64_t other_batch) const {
  // The sum may exceed max_batch: the rank keeps (up to the rounding into equal micro-batches)
  // the tokens per step its instances had.
  return plan_batch(plan_.batch + other_batch, max_micro_, samples_.per_rank).batch;
}

std::vector<double> AdLoCoBatch::state() const {
  return {static_cast<double>(plan_.batch)};
}

void AdLoCoBatch::load_state(const std::vector<double>& state) {
  if (state.size() != 1 || !(state[0] >= 1.0)) {
    throw CheckpointError(fmt::format(
        "the adloco batch controller keeps its batch (1 value), but the checkpoint holds {} "
        "values: was it written with another batch.controller?",
        state.size()));
  }
  plan_ = plan_batch(static_cast<int64_t>(state[0]), max_micro_, samples_.per_rank);
}

}  // namespace autoloco
