// The inner optimizer seam: one step over FlatParams' buffers at a given learning rate. AdamW is
// the method's; plain SGD exists as the reference of the sign check (ALGORITHMS.md §1).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/optim/flat_params.hpp"

namespace autoloco {

class InnerOptimizer {
 public:
  virtual ~InnerOptimizer() = default;
  virtual void step(double lr) = 0;
};

// An optimizer whose state is a step count and two vectors as long as its view. Checkpoints keep
// them as adamw/step, adamw/exp_avg and adamw/exp_avg_sq whatever the optimizer (FlatAdamW's
// moments; FlatMuon's momentum on its matrices and AdamW's moments elsewhere), so sharded
// pieces, elastic restarts and the checkpoint tool treat every such optimizer alike.
class MomentOptimizer : public InnerOptimizer {
 public:
  virtual int64_t step_count() const = 0;
  virtual torch::Tensor& exp_avg() = 0;
  virtual torch::Tensor& exp_avg_sq() = 0;
  virtual const torch::Tensor& exp_avg() const = 0;
  virtual const torch::Tensor& exp_avg_sq() const = 0;
  // Copies m and v (numel equal to the view's) into the state. Throws Error otherwise.
  virtual void set_state(int64_t step, const torch::Tensor& m, const torch::Tensor& v) = 0;
};

// p <- p − lr g, nothing else.
class FlatSgd final : public InnerOptimizer {
 public:
  explicit FlatSgd(const FlatView& view) : view_(view) {}
  void step(double lr) override;

 private:
  FlatView view_;
};

// Where Muon steps a matrix of the flat layout (muon.hpp).
struct MuonMatrix {
  int64_t offset = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  bool decayed = false;
};

// inner.optimizer: adamw (inner.betas, eps, weight_decay; inner.adamw picks the kernel for the
// params' device) or sgd, over the whole buffer or over `view` (one member's shard); muon over
// a whole buffer, stepping `matrices` (muon_matrices()) with Muon and the rest with AdamW.
std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner, FlatParams& params);
std::unique_ptr<InnerOptimizer> make_inner_optimizer(const InnerConfig& inner, const FlatView& view,
                                                     const std::vector<MuonMatrix>& matrices = {});

}  // namespace autoloco
