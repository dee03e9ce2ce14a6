#include "autoloco/train/model_instance.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autoloco/optim/inner_optimizer.hpp"

namespace autoloco {

int instance_stream_member(int id, int member, int ranks_per_dc) {
  return member + id * ranks_per_dc;
}

void average_into_first(std::vector<ModelInstance>& instances) {
  if (instances.size() < 2) return;
  torch::NoGradGuard no_grad;
  double total = 0.0;
  for (const ModelInstance& inst : instances)
    total += static_cast<double>(inst.batch->plan().batch);
  torch::Tensor& first = instances[0].params->values();
  first.mul_(static_cast<double>(instances[0].batch->plan().batch) / total);
  for (size_t i = 1; i < instances.size(); ++i) {
    const double w = static_cast<double>(instances[i].batch->plan().batch) / total;
    first.add_(instances[i].params->values(), w);
  }
}

std::pair<size_t, size_t> merge_pair(const std::vector<double>& demands,
                                     const std::vector<int64_t>& batches) {
  std::vector<size_t> order(demands.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto demand = [&](size_t i) {
    return std::isnan(demands[i]) ? static_cast<double>(batches[i]) : demands[i];
  };
  // Stable: equal demands merge the lower-numbered instances first.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return demand(a) < demand(b); });
  return {std::min(order[0], order[1]), std::max(order[0], order[1])};
}

void merge_instances(ModelInstance& into, const ModelInstance& from) {
  torch::NoGradGuard no_grad;
  const double bi = static_cast<double>(into.batch->plan().batch);
  const double bj = static_cast<double>(from.batch->plan().batch);
  const double wi = bi / (bi + bj);
  const double wj = bj / (bi + bj);
  into.params->values().mul_(wi).add_(from.params->values(), wj);
  auto* a = dynamic_cast<MomentOptimizer*>(into.optimizer.get());
  const auto* b = dynamic_cast<const MomentOptimizer*>(from.optimizer.get());
  if (a && b) {
    const torch::Tensor m = a->exp_avg() * wi + b->exp_avg() * wj;
    const torch::Tensor v = a->exp_avg_sq() * wi + b->exp_avg_sq() * wj;
    a->set_state(std::max(a->step_count(), b->step_count()), m, v);
  }
  into.batch->absorb(from.batch->plan().batch);
  into.demand += from.demand;  // NaN if either had no answer
}

}  // namespace autoloco
