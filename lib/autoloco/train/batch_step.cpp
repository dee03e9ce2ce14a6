#include "autoloco/train/batch_step.hpp"

#include "autoloco/train/precision.hpp"

namespace autoloco {

torch::Tensor to_device(const torch::Tensor& host, torch::Device device) {
  if (!device.is_cuda()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

torch::Tensor forward_backward_async(Decoder& model, FlatParams& params, BatchStream& stream,
                                     const BatchPlan& plan, torch::Device device,
                                     GradientSamples* samples, bool bf16) {
  params.zero_grad();
  // Summed on the device: a read per micro-batch would stall a GPU's queue.
  torch::Tensor loss_sum;
  // Equal micro-batches: the batch's mean loss is the mean of theirs, and so is its gradient.
  const double scale = 1.0 / static_cast<double>(plan.accum);
  for (int64_t micro = 0; micro < plan.accum; ++micro) {
    Batch batch = stream.next(plan.micro_batch);
    torch::Tensor loss;
    {
      AutocastScope autocast(device, bf16);
      const torch::Tensor logits = model->forward(to_device(batch.inputs, device));
      loss = lm_loss(logits, to_device(batch.targets, device));
    }
    (loss * scale).backward();
    loss_sum = micro == 0 ? loss.detach().to(torch::kDouble) : loss_sum + loss.detach();
    if (samples) samples->after_micro_batch(params, micro + 1, plan.accum);
  }
  return loss_sum * scale;
}

double forward_backward(Decoder& model, FlatParams& params, BatchStream& stream,
                        const BatchPlan& plan, torch::Device device, GradientSamples* samples,
                        bool bf16) {
  return forward_backward_async(model, params, stream, plan, device, samples, bf16).item<double>();
}

void GradientSamples::after_micro_batch(FlatParams& params, int64_t done, int64_t accum) {
  if (per_rank_ != 2 || 2 * done != accum) return;
  // Half of the micro-batches, each scaled by 1/accum: twice that is the first half's mean.
  torch::NoGradGuard no_grad;
  if (!sample_.defined()) sample_ = torch::empty_like(params.grads());
  sample_.copy_(params.grads()).mul_(2.0);
}

void GradientSamples::before_sync(FlatParams& params) {
  if (per_rank_ != 1) return;
  torch::NoGradGuard no_grad;
  if (!sample_.defined()) sample_ = torch::empty_like(params.grads());
  sample_.copy_(params.grads());
}

torch::Tensor GradientSamples::products(FlatParams& params) const {
  torch::NoGradGuard no_grad;
  const torch::Tensor& mean = params.grads();
  return torch::stack({mean.dot(mean), sample_.dot(sample_), sample_.dot(mean)}).to(torch::kDouble);
}

void GradientSamples::add_step(const double* p, NoiseSums& sums) const {
  const double mean_sq = p[0];
  double norms[2] = {p[1], 0.0};
  double dots[2] = {p[2], 0.0};
  if (per_rank_ == 2) {
    // A dc of one rank: ḡ is the mean of the two halves, so the second is g_2 = 2ḡ − g_1 and
    // ‖g_2‖² = 4‖ḡ‖² − 4⟨g_1,ḡ⟩ + ‖g_1‖², ⟨g_2,ḡ⟩ = 2‖ḡ‖² − ⟨g_1,ḡ⟩.
    norms[1] = 4.0 * mean_sq - 4.0 * dots[0] + norms[0];
    dots[1] = 2.0 * mean_sq - dots[0];
  }
  sums.add_step(norms, dots, static_cast<size_t>(per_rank_), mean_sq, count_mean_);
}

void GradientSamples::after_sync(FlatParams& params, NoiseSums& sums) {
  const torch::Tensor read = products(params).to(torch::kCPU);
  add_step(read.data_ptr<double>(), sums);
}

}  // namespace autoloco
