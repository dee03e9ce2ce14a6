// Muon (Jordan et al. 2024) as the inner optimizer, as MuLoCo runs it (Thérien et al., arXiv
// 2505.23725): each 2-D weight of the decoder's blocks steps along its orthogonalised momentum;
// embeddings, head, norms and biases step with AdamW (ALGORITHMS.md §5, docs/methods.md).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/inner_optimizer.hpp"

namespace autoloco {

// The quintic of Jordan's Muon: X <- a X + (b A + c A^2) X with A = X X^T. After 5 steps every
// singular value of at least 1.5e-3 (of the unit-Frobenius input) is in [0.680, 1.2024], not
// at 1: Muon trades exactness for speed (docs/methods.md).
inline constexpr double kNsA = 3.4445;
inline constexpr double kNsB = -4.7750;
inline constexpr double kNsC = 2.0315;

// The scratch of one orthogonalisation of an m x n matrix (m <= n), allocated once.
struct NewtonSchulzScratch {
  NewtonSchulzScratch(int64_t m, int64_t n, const torch::TensorOptions& options);
  torch::Tensor x;     // [m, n]: the input, then the result
  torch::Tensor y;     // [m, n]
  torch::Tensor a;     // [m, m]
  torch::Tensor b;     // [m, m]
  torch::Tensor norm;  // []
};

// Orthogonalises s.x in place: scales it to unit Frobenius norm, then `steps` quintic steps.
// s.x must have no more rows than columns (transpose a tall matrix first).
void newton_schulz(NewtonSchulzScratch& s, int64_t steps);

// The scale of a rows x cols update: 0.2 sqrt(max(rows, cols)), Moonlight's (Liu et al. 2025,
// arXiv 2502.16982), which gives the update the RMS of a typical AdamW step (0.2), so that
// inner.lr and inner.weight_decay carry over from AdamW.
double muon_scale(int64_t rows, int64_t cols);

// Whether a parameter, by name, belongs to one of the decoder's blocks (model_specs.hpp's
// block_parameters: optim may not know the model's names).
using BlockRule = std::function<bool(const std::string& name)>;

// The parameters Muon steps: every 2-D weight of a block, in layout order. Embeddings, the
// head, norms and biases are left to AdamW.
std::vector<MuonMatrix> muon_matrices(const std::vector<ParamSlice>& slices,
                                      const BlockRule& in_block);

struct MuonOptions {
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  double lr_ratio = 1.0;  // Muon's rate over the schedule's (inner.muon_lr / inner.lr)
  AdamWOptions adamw;     // for every element outside the matrices
};

// State over the whole view, as a MomentOptimizer: exp_avg holds Muon's momentum B on the
// matrices and AdamW's first moment elsewhere; exp_avg_sq AdamW's second moment (zero on the
// matrices, which keeps the checkpoint layout of AdamW at the price of one unused float per
// matrix element).
//
// Per matrix W with gradient G, at rate lr (the schedule's times lr_ratio):
//   B <- mu B + G ;  N = nesterov ? G + mu B : B ;  O = NS(N) (transposed when rows > cols)
//   W <- W (1 - lr wd) - lr muon_scale(rows, cols) O          (wd on decayed matrices)
// Newton-Schulz runs in bf16 on a GPU (as Jordan's) and in fp32 on the CPU.
class FlatMuon final : public MomentOptimizer {
 public:
  FlatMuon(const FlatView& view, std::vector<MuonMatrix> matrices, MuonOptions options);

  void step(double lr) override;

  int64_t step_count() const override { return step_; }
  torch::Tensor& exp_avg() override { return exp_avg_; }
  torch::Tensor& exp_avg_sq() override { return exp_avg_sq_; }
  const torch::Tensor& exp_avg() const override { return exp_avg_; }
  const torch::Tensor& exp_avg_sq() const override { return exp_avg_sq_; }
  void set_state(int64_t step, const torch::Tensor& m, const torch::Tensor& v) override;

  const std::vector<MuonMatrix>& matrices() const { return matrices_; }
  const MuonOptions& options() const { return options_; }
  // Seconds spent in Newton-Schulz by the last step (synchronised with the device), when
  // timing is on: autoloco-bench's share of the step.
  void set_timing(bool on) { timing_ = on; }
  double last_ns_seconds() const { return ns_seconds_; }

 private:
  void step_matrix(const MuonMatrix& m, double lr);
  // Per matrix shape: the Nesterov input (fp32) and the Newton-Schulz scratch.
  struct ShapeScratch {
    torch::Tensor nesterov;
    NewtonSchulzScratch ns;
  };
  ShapeScratch& scratch(int64_t rows, int64_t cols);

  FlatView view_;
  std::vector<MuonMatrix> matrices_;
  MuonOptions options_;
  int64_t step_ = 0;
  torch::Tensor exp_avg_;
  torch::Tensor exp_avg_sq_;
  std::vector<std::unique_ptr<FlatAdamW>> adamw_;  // one per run between matrices
  std::map<std::pair<int64_t, int64_t>, ShapeScratch> scratch_;
  bool timing_ = false;
  double ns_seconds_ = 0.0;
};

}  // namespace autoloco
