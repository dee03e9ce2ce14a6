// The inner optimizer seam: one step over FlatParams' buffers at a given learning rate. AdamW is
// the method's; plain SGD exists as the reference of the sign check (ALGORITHMS.md §1).
#pragma once

#include <memory>

#include "autoloco/config/config.hpp"
#include "autoloco/optim/flat_params.hpp"

namespace autoloco {

class InnerOptimizer {
 public:
  virtual ~InnerOptimizer() = default;
  virtual void step(double lr) = 0;
};

// p <- p − lr g, nothing else.
class FlatSgd final : public InnerOptimizer {
 public:
  explicit FlatSgd(const FlatView& view) : view_(view) {}
  void step(double lr) override;

 private:
  FlatView view_;
};

// inner.optimizer: adamw (inner.betas, eps, weight_decay; inner.adamw picks the kernel for the
// params' device) or sgd, over the whole buffer or over `view` (one member's shard).
std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner, FlatParams& params);
std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner,
                                                     const FlatView& view);

}  // namespace autoloco
