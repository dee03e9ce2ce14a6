// The outer optimizer: moves the anchor by the dcs' averaged pseudo-gradient once per round. A
// new outer method is one new implementation registered in make_outer_optimizer, not a branch in
// the training loop.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/optim/outer_correction.hpp"
#include "autoloco/optim/round_stats.hpp"

namespace autoloco {

class OuterOptimizer {
 public:
  virtual ~OuterOptimizer() = default;
  // anchor <- anchor moved by mean_delta (Δ̄ = anchor − mean replica); both fp32, same device.
  // The step may use mean_delta's storage for its arithmetic (it holds no longer Δ̄ after), so
  // that the outer state costs its own tensors and no full-size temporary.
  virtual void step(torch::Tensor& anchor, torch::Tensor& mean_delta, const RoundStats& stats) = 0;
  // The learning rate and momentum the last step used (for syncs.jsonl).
  virtual double last_lr() const = 0;
  virtual double last_momentum() const = 0;
  // Tensors that a checkpoint must keep (name -> tensor; undefined while not yet created).
  virtual std::vector<std::pair<std::string, torch::Tensor>> state() = 0;
  // Takes back one of state()'s tensors (copied to the anchor's device); an undefined tensor
  // resets it to "not yet created". Throws CheckpointError for an unknown name.
  virtual void load_state(const std::string& name, const torch::Tensor& value) = 0;
};

// SGD with momentum in PyTorch's form, Nesterov by default (DiLoCo):
//   b <- mu b + Δ̄ ;  anchor <- anchor − lr (Δ̄ + mu b)     (Nesterov)
//                    anchor <- anchor − lr b               (heavy ball)
// mu follows outer.momentum and outer.momentum_schedule by the round's last step; then the
// AutoLoCo correction adjusts mu and lr for the round's length (outer_correction.hpp).
// Its state is b (4 bytes per parameter) and a scratch of at most kScratchChunk values: the
// Nesterov direction Δ̄ + mu b is formed in mean_delta's storage, piece by piece.
class NesterovOuter final : public OuterOptimizer {
 public:
  static constexpr int64_t kScratchChunk = int64_t{1} << 22;  // 16 MiB of fp32

  NesterovOuter(double lr, double momentum, std::vector<MomentumChange> schedule, bool nesterov,
                OuterCorrection correction = {});

  void step(torch::Tensor& anchor, torch::Tensor& mean_delta, const RoundStats& stats) override;
  double last_lr() const override { return last_lr_; }
  double last_momentum() const override { return last_mu_; }
  std::vector<std::pair<std::string, torch::Tensor>> state() override;
  void load_state(const std::string& name, const torch::Tensor& value) override;

  // The momentum in force for a round that ends after `step` inner steps.
  double momentum_at(int64_t step) const;

 private:
  double lr_;
  double momentum_;
  std::vector<MomentumChange> schedule_;
  bool nesterov_;
  OuterCorrection correction_;
  double last_mu_ = 0.0;
  double last_lr_ = 0.0;
  torch::Tensor buffer_;   // b, created on the first step
  torch::Tensor scratch_;  // mu b of one chunk, created on the first Nesterov step
};

// diloco: NesterovOuter from outer.* (H0, interval.H, is the correction's reference interval);
// local_sgd: plain averaging (lr 1, no momentum). Throws ConfigError for ddp, which has no outer
// optimizer.
std::unique_ptr<OuterOptimizer> make_outer_optimizer(const OuterConfig& outer, int64_t H0);

}  // namespace autoloco
