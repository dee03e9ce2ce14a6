#include "autoloco/optim/inner_optimizer.hpp"

#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/muon.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

void FlatSgd::step(double lr) {
  torch::NoGradGuard no_grad;
  view_.values.sub_(view_.grads, lr);
}

std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner, FlatParams& params) {
  return make_inner_optimizer(inner, params.view());
}

namespace {

AdamWOptions adamw_options(const InnerConfig& inner, const FlatView& view) {
  AdamWOptions o{inner.betas[0], inner.betas[1], inner.eps, inner.weight_decay};
  // auto: fused where it pays (a GPU, whose time goes to memory passes); the CPU keeps the
  // flat update, so CPU runs stay bitwise what they were.
  o.fused = inner.adamw == "fused" || (inner.adamw == "auto" && view.values.is_cuda());
  return o;
}

}  // namespace

std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner, const FlatView& view,
                                                     const std::vector<MuonMatrix>& matrices) {
  if (inner.optimizer == "sgd") return std::make_unique<FlatSgd>(view);
  if (inner.optimizer == "adamw")
    return std::make_unique<FlatAdamW>(view, adamw_options(inner, view));
  if (inner.optimizer == "muon") {
    // Without matrices Muon would silently be AdamW everywhere.
    if (matrices.empty()) {
      throw Error("inner.optimizer muon: no block matrices to orthogonalise (pass muon_matrices)");
    }
    MuonOptions o;
    o.momentum = inner.muon_momentum;
    o.nesterov = inner.muon_nesterov;
    o.ns_steps = inner.muon_ns_steps;
    o.lr_ratio = inner.muon_lr > 0.0 ? inner.muon_lr / inner.lr : 1.0;
    o.adamw = adamw_options(inner, view);
    return std::make_unique<FlatMuon>(view, matrices, o);
  }
  throw ConfigError("config key inner.optimizer: unknown optimizer '" + inner.optimizer + "'");
}

}  // namespace autoloco
