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
  explicit FlatSgd(FlatParams& params) : params_(params) {}
  void step(double lr) override;

 private:
  FlatParams& params_;
};

// inner.optimizer: adamw (inner.betas, eps, weight_decay; inner.adamw picks the kernel for the
// params' device) or sgd.
std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner, FlatParams& params);

}  // namespace autoloco
