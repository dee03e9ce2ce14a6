// FlatMuon and the Newton-Schulz orthogonalisation. Every product writes into scratch allocated
// at the first step of a shape, so a step allocates nothing.
#include "autoloco/optim/muon.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "autoloco/util/error.hpp"

namespace autoloco {

NewtonSchulzScratch::NewtonSchulzScratch(int64_t m, int64_t n, const torch::TensorOptions& options)
    : x(torch::empty({m, n}, options)),
      y(torch::empty({m, n}, options)),
      a(torch::empty({m, m}, options)),
      b(torch::empty({m, m}, options)),
      norm(torch::empty({}, options)) {}

void newton_schulz(NewtonSchulzScratch& s, int64_t steps) {
  torch::NoGradGuard no_grad;
  if (s.x.size(0) > s.x.size(1)) {
    throw Error("newton_schulz: a " + std::to_string(s.x.size(0)) + " x " +
                std::to_string(s.x.size(1)) + " matrix is tall: transpose it first");
  }
  // 1e-7 keeps a zero matrix (a parameter without gradient yet) at zero instead of NaN.
  at::linalg_vector_norm_out(s.norm, s.x);
  s.x.div_(s.norm.add_(1e-7));
  for (int64_t i = 0; i < steps; ++i) {
    at::mm_out(s.a, s.x, s.x.t());                  // A = X X^T
    at::addmm_out(s.b, s.a, s.a, s.a, kNsB, kNsC);  // B = b A + c A A
    at::addmm_out(s.y, s.x, s.b, s.x, kNsA, 1.0);   // Y = a X + B X
    std::swap(s.x, s.y);
  }
}

double muon_scale(int64_t rows, int64_t cols) {
  return 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols)));
}

std::vector<MuonMatrix> muon_matrices(const std::vector<ParamSlice>& slices,
                                      const BlockRule& in_block) {
  std::vector<MuonMatrix> out;
  for (const ParamSlice& s : slices) {
    if (s.shape.size() != 2 || !in_block(s.name)) continue;
    out.push_back({s.offset, s.shape[0], s.shape[1], s.decayed});
  }
  std::sort(out.begin(), out.end(),
            [](const MuonMatrix& a, const MuonMatrix& b) { return a.offset < b.offset; });
  return out;
}

namespace {

// The view's elements [begin, begin + count) as a view of their own, its decayed prefix kept.
FlatView sub_view(const FlatView& v, int64_t begin, int64_t count) {
  const int64_t decayed = std::clamp<int64_t>(v.decay_numel - begin, 0, count);
  return {v.values.narrow(0, begin, count), v.grads.narrow(0, begin, count), decayed};
}

}  // namespace

FlatMuon::FlatMuon(const FlatView& view, std::vector<MuonMatrix> matrices, MuonOptions options)
    : view_(view),
      matrices_(std::move(matrices)),
      options_(options),
      exp_avg_(torch::zeros_like(view.values)),
      exp_avg_sq_(torch::zeros_like(view.values)) {
  if (!view_.grads.defined()) throw Error("FlatMuon: needs the flat gradient buffer");
  // AdamW over each run between matrices, its state a view of this optimizer's vectors.
  int64_t at = 0;
  auto adamw_run = [&](int64_t end) {
    if (end > at) {
      adamw_.push_back(std::make_unique<FlatAdamW>(sub_view(view_, at, end - at), options_.adamw,
                                                   exp_avg_.narrow(0, at, end - at),
                                                   exp_avg_sq_.narrow(0, at, end - at)));
    }
  };
  for (const MuonMatrix& m : matrices_) {
    if (m.offset < at || m.offset + m.rows * m.cols > view_.numel() || m.rows < 1 || m.cols < 1) {
      throw Error("FlatMuon: matrix at offset " + std::to_string(m.offset) +
                  " overlaps another or lies outside the " + std::to_string(view_.numel()) +
                  " elements of the buffer");
    }
    adamw_run(m.offset);
    at = m.offset + m.rows * m.cols;
  }
  adamw_run(view_.numel());
}

FlatMuon::ShapeScratch& FlatMuon::scratch(int64_t rows, int64_t cols) {
  const auto key = std::make_pair(rows, cols);
  auto it = scratch_.find(key);
  if (it == scratch_.end()) {
    // bf16 products on a GPU, as Jordan's Muon: the iteration tolerates the rounding, and the
    // tensor cores run it several times faster. The CPU has no such gain, so fp32.
    const auto ns =
        view_.values.options().dtype(view_.values.is_cuda() ? torch::kBFloat16 : torch::kFloat32);
    torch::Tensor nesterov =
        options_.nesterov ? torch::empty({rows, cols}, view_.values.options()) : torch::Tensor();
    it = scratch_
             .emplace(key, ShapeScratch{nesterov, NewtonSchulzScratch(std::min(rows, cols),
                                                                      std::max(rows, cols), ns)})
             .first;
  }
  return it->second;
}

void FlatMuon::step_matrix(const MuonMatrix& m, double lr) {
  const int64_t n = m.rows * m.cols;
  torch::Tensor w = view_.values.narrow(0, m.offset, n).view({m.rows, m.cols});
  const torch::Tensor g = view_.grads.narrow(0, m.offset, n).view({m.rows, m.cols});
  torch::Tensor b = exp_avg_.narrow(0, m.offset, n).view({m.rows, m.cols});
  const double mu = options_.momentum;
  b.mul_(mu).add_(g);
  ShapeScratch& shape = scratch(m.rows, m.cols);
  NewtonSchulzScratch& s = shape.ns;
  torch::Tensor input = b;
  if (options_.nesterov) {
    input = shape.nesterov;
    at::add_out(input, g, b, mu);
  }
  const bool tall = m.rows > m.cols;
  s.x.copy_(tall ? input.t() : input);
  if (!timing_) {
    newton_schulz(s, options_.ns_steps);
  } else {
    const bool cuda = view_.values.is_cuda();
    if (cuda) torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    newton_schulz(s, options_.ns_steps);
    if (cuda) torch::cuda::synchronize();
    ns_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (m.decayed && options_.adamw.weight_decay != 0.0) {
    w.mul_(1.0 - lr * options_.adamw.weight_decay);
  }
  w.add_(tall ? s.x.t() : s.x, -lr * muon_scale(m.rows, m.cols));
}

void FlatMuon::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  for (auto& adamw : adamw_)
    adamw->step(lr);
  ns_seconds_ = 0.0;
  const double muon_lr = lr * options_.lr_ratio;
  for (const MuonMatrix& m : matrices_)
    step_matrix(m, muon_lr);
}

void FlatMuon::set_state(int64_t step, const torch::Tensor& m, const torch::Tensor& v) {
  if (m.numel() != exp_avg_.numel() || v.numel() != exp_avg_sq_.numel()) {
    throw Error("FlatMuon::set_state: state of " + std::to_string(m.numel()) + "/" +
                std::to_string(v.numel()) + " elements does not fit " +
                std::to_string(exp_avg_.numel()) + " parameters");
  }
  if (step < 0) throw Error("FlatMuon::set_state: negative step " + std::to_string(step));
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(m.reshape({-1}));
  exp_avg_sq_.copy_(v.reshape({-1}));
  // The AdamW runs' moments are views of these vectors: only their step counts are their own.
  for (auto& adamw : adamw_)
    adamw->set_state(step, adamw->exp_avg(), adamw->exp_avg_sq());
  step_ = step;
}

}  // namespace autoloco
