// FlatAdamW and flat gradient clipping. This is the hot path of every inner step: each line is
// one pass over the flat buffer, with no per-parameter loop.
#include "autoloco/optim/adamw.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "autoloco/util/error.hpp"

namespace autoloco {

FlatAdamW::FlatAdamW(FlatParams& params, AdamWOptions options)
    : FlatAdamW(params.view(), options) {}

FlatAdamW::FlatAdamW(const FlatView& view, AdamWOptions options)
    : FlatAdamW(view, options, torch::zeros_like(view.values), torch::zeros_like(view.values)) {}

FlatAdamW::FlatAdamW(const FlatView& view, AdamWOptions options, torch::Tensor exp_avg,
                     torch::Tensor exp_avg_sq)
    : view_(view),
      options_(options),
      exp_avg_(std::move(exp_avg)),
      exp_avg_sq_(std::move(exp_avg_sq)) {
  if (exp_avg_.numel() != view_.numel() || exp_avg_sq_.numel() != view_.numel()) {
    throw Error("FlatAdamW: moments of " + std::to_string(exp_avg_.numel()) + "/" +
                std::to_string(exp_avg_sq_.numel()) + " elements for a view of " +
                std::to_string(view_.numel()));
  }
  if (options_.fused) {
    step_count_ = torch::zeros({}, view_.values.options());
  } else {
    denom_ = torch::empty_like(view_.values);
  }
}

void FlatAdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  if (options_.fused) {
    fused_step(lr);
    return;
  }
  auto& p = view_.values;
  const auto& g = view_.grads;
  const double b1 = options_.beta1;
  const double b2 = options_.beta2;
  const auto t = static_cast<double>(step_);
  const double bias_c1 = 1.0 - std::pow(b1, t);
  const double bias_c2 = 1.0 - std::pow(b2, t);

  if (options_.weight_decay != 0.0 && view_.decay_numel > 0) {
    p.narrow(0, 0, view_.decay_numel).mul_(1.0 - lr * options_.weight_decay);
  }
  exp_avg_.mul_(b1).add_(g, 1.0 - b1);
  exp_avg_sq_.mul_(b2).addcmul_(g, g, 1.0 - b2);
  // Same operation order as torch::optim::AdamW, so both round alike.
  torch::sqrt_out(denom_, exp_avg_sq_);
  denom_.div_(std::sqrt(bias_c2)).add_(options_.eps);
  p.addcdiv_(exp_avg_, denom_, -lr / bias_c1);
}

void FlatAdamW::fused_step(double lr) {
  step_count_.fill_(static_cast<double>(step_));
  const auto& o = options_;
  // Weight decay is per call: the decayed slice [0, decay_numel) and the rest, each contiguous.
  auto update = [&](int64_t begin, int64_t numel, double weight_decay) {
    if (numel == 0) return;
    at::_fused_adamw_({view_.values.narrow(0, begin, numel)}, {view_.grads.narrow(0, begin, numel)},
                      {exp_avg_.narrow(0, begin, numel)}, {exp_avg_sq_.narrow(0, begin, numel)},
                      /*max_exp_avg_sqs=*/{}, {step_count_}, lr, o.beta1, o.beta2, weight_decay,
                      o.eps, /*amsgrad=*/false, /*maximize=*/false);
  };
  const int64_t decayed = o.weight_decay != 0.0 ? view_.decay_numel : 0;
  update(0, decayed, o.weight_decay);
  update(decayed, view_.numel() - decayed, 0.0);
}

void FlatAdamW::set_state(int64_t step, const torch::Tensor& m, const torch::Tensor& v) {
  if (m.numel() != exp_avg_.numel() || v.numel() != exp_avg_sq_.numel()) {
    throw Error("FlatAdamW::set_state: state of " + std::to_string(m.numel()) + "/" +
                std::to_string(v.numel()) + " elements does not fit " +
                std::to_string(exp_avg_.numel()) + " parameters");
  }
  if (step < 0) throw Error("FlatAdamW::set_state: negative step " + std::to_string(step));
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(m.reshape({-1}));
  exp_avg_sq_.copy_(v.reshape({-1}));
  step_ = step;
}

torch::Tensor clip_grad_norm_async(FlatParams& params, double max_norm) {
  torch::NoGradGuard no_grad;
  auto& g = params.grads();
  if (!g.is_cuda()) {
    const double norm = clip_grad_norm(params, max_norm);
    return torch::full({}, norm, g.options());
  }
  torch::Tensor norm = g.norm();
  if (max_norm > 0.0) g.mul_((max_norm / (norm + 1e-6)).clamp_max(1.0));
  return norm;
}

double clip_grad_norm(FlatParams& params, double max_norm) {
  torch::NoGradGuard no_grad;
  auto& g = params.grads();
  const double norm = g.norm().item<double>();
  if (max_norm > 0.0) {
    const double scale = max_norm / (norm + 1e-6);
    if (scale < 1.0) g.mul_(scale);
  }
  return norm;
}

}  // namespace autoloco
