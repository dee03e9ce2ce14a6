#include "autoloco/optim/inner_optimizer.hpp"

#include "autoloco/optim/adamw.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

void FlatSgd::step(double lr) {
  torch::NoGradGuard no_grad;
  view_.values.sub_(view_.grads, lr);
}

std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner, FlatParams& params) {
  return make_inner_optimizer(inner, params.view());
}

std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner,
                                                     const FlatView& view) {
  if (inner.optimizer == "sgd") return std::make_unique<FlatSgd>(view);
  if (inner.optimizer == "adamw") {
    AdamWOptions o{inner.betas[0], inner.betas[1], inner.eps, inner.weight_decay};
    // auto: fused where it pays (a GPU, whose time goes to memory passes); the CPU keeps the
    // flat update, so CPU runs stay bitwise what they were.
    o.fused = inner.adamw == "fused" ||
              (inner.adamw == "auto" && view.values.is_cuda() && fused_adamw_available());
    return std::make_unique<FlatAdamW>(view, o);
  }
  throw ConfigError("config key inner.optimizer: unknown optimizer '" + inner.optimizer + "'");
}

}  // namespace autoloco
