// What each rank's memory holds: the planned bytes by class of this run (memory_plan.hpp) in the
// start log, and in summary.json beside what each rank really held (its resident memory before
// the model was built and its peak), so that the plan can be checked against the kernel's count
// (autoloco-bench --shard-memory, docs/sharding.md).
#include <fmt/format.h>

#include "autoloco/metrics/progress.hpp"
#include "autoloco/train/memory_plan.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/memory_usage.hpp"

namespace autoloco {
namespace {

std::string bytes(int64_t b) {
  return format_si(static_cast<double>(b)) + "B";
}

}  // namespace

MemoryClasses Trainer::planned_memory() const {
  return plan_memory(config_, config_.topology.shard, topo_.ranks_per_dc, device_.is_cuda(),
                     topo_.num_dcs);
}

void Trainer::log_memory() const {
  if (!options_.print_progress) return;
  const MemoryClasses m = planned_memory();
  log::info(
      "memory per rank (topology.shard {}, planned): parameters {}, gradients {}, optimizer {}, "
      "outer state {}, residuals {}, buffers {}, activations ~{} | {} in all",
      config_.topology.shard, bytes(m.parameters), bytes(m.gradients), bytes(m.optimizer),
      bytes(m.outer_state), bytes(m.residuals), bytes(m.buffers), bytes(m.activations),
      bytes(m.total()));
}

std::vector<int64_t> Trainer::world_values(int64_t value) const {
  std::vector<int64_t> all(static_cast<size_t>(topo_.world_size));
  world_comm_->allgather(&value, all.data(), 1, DType::i64);
  return all;
}

void Trainer::measure_memory(TrainSummary& s) const {
  s.baseline_rss_bytes = world_values(baseline_rss_);
  s.peak_rss_bytes = world_values(peak_resident_bytes());
}

JsonObject Trainer::memory_json(const TrainSummary& s) const {
  return JsonObject()
      .add("shard", config_.topology.shard)
      .add("planned", memory_classes_json(planned_memory()))
      .add("baseline_rss_bytes", s.baseline_rss_bytes)
      .add("peak_rss_bytes", s.peak_rss_bytes);
}

}  // namespace autoloco
