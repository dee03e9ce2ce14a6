// The inner optimizer: AdamW over FlatParams' buffers in a few whole-buffer in-place ops, with
// the same update as torch::optim::AdamW; and global gradient-norm clipping on the flat grads.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/inner_optimizer.hpp"

namespace autoloco {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to FlatParams' decayed slice only
  // LibTorch's fused kernel (at::_fused_adamw_): the same update in one pass over p, g, m and
  // v instead of about nine; rounding differs in the last bits.
  bool fused = false;
};

// PyTorch's AdamW, step t (1-based), on the whole flat buffer:
//   p[:decay_numel] *= 1 - lr wd
//   m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2
//   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// State (m, v, t) is this dc's own and survives outer syncs; checkpoints save it via exp_avg(),
// exp_avg_sq(), step_count() and restore it with set_state().
class FlatAdamW final : public MomentOptimizer {
 public:
  // Over the whole flat buffer, or over `view` (one member's shard: topology.shard), whose
  // tensors must outlive it.
  FlatAdamW(FlatParams& params, AdamWOptions options);
  FlatAdamW(const FlatView& view, AdamWOptions options);
  // With its moments in `exp_avg` and `exp_avg_sq` (views of a larger state: FlatMuon's).
  FlatAdamW(const FlatView& view, AdamWOptions options, torch::Tensor exp_avg,
            torch::Tensor exp_avg_sq);

  void step(double lr) override;

  int64_t step_count() const override { return step_; }
  torch::Tensor& exp_avg() override { return exp_avg_; }
  torch::Tensor& exp_avg_sq() override { return exp_avg_sq_; }
  const torch::Tensor& exp_avg() const override { return exp_avg_; }
  const torch::Tensor& exp_avg_sq() const override { return exp_avg_sq_; }
  const AdamWOptions& options() const { return options_; }

  void set_state(int64_t step, const torch::Tensor& m, const torch::Tensor& v) override;

 private:
  void fused_step(double lr);

  FlatView view_;
  AdamWOptions options_;
  int64_t step_ = 0;
  torch::Tensor exp_avg_;
  torch::Tensor exp_avg_sq_;
  torch::Tensor denom_;       // scratch of the flat update, kept to avoid an allocation per step
  torch::Tensor step_count_;  // the fused kernel reads t from a float tensor on the device
};

// Returns the global L2 norm of the gradients before clipping. When max_norm > 0, scales the
// gradients by max_norm / (norm + 1e-6) if that is below 1, as torch::nn::utils::clip_grad_norm_.
double clip_grad_norm(FlatParams& params, double max_norm);

// The same, returning the norm as a 0-dim float tensor on the gradients' device. On a GPU the
// scale is computed there, so the step needs no host read (which would stall the queue); on the
// CPU it is clip_grad_norm, bit for bit.
torch::Tensor clip_grad_norm_async(FlatParams& params, double max_norm);

}  // namespace autoloco
