// Mixed precision of the inner step (run.precision, run.tf32): bf16 autocast of the forward pass
// over fp32 master weights. Weights, gradients, the flat buffers, AdamW's moments, the outer
// state and checkpoints all stay fp32; only the matmuls and attention of the forward (and, by
// autograd, of the backward) run in bf16. This keeps every collective, checkpoint and optimizer
// exactly as in fp32 runs, at the cost of one bf16 copy of each weight per forward.
#pragma once

#include <torch/torch.h>

#include "autoloco/config/config.hpp"

namespace autoloco {

// run.precision for `device`: auto means bf16 on cuda and fp32 on the cpu.
bool uses_bf16(const RunConfig& run, torch::Device device);

// Process-wide matmul settings for a GPU run: TF32 for the float32 matmuls that autocast leaves
// in fp32 when run.tf32 is true (cuBLAS's "high" precision), full fp32 otherwise. Does nothing
// on the cpu, where "high" could mean bf16 on some oneDNN builds.
void configure_matmul_precision(const RunConfig& run, torch::Device device);

// Autocast to bf16 on `device`'s type while it lives (when `enabled`). Wrap the forward pass
// and the loss, not backward: autograd replays the forward's dtypes, and autocast state leaking
// into backward is what PyTorch warns against. Leaving the outermost scope drops autocast's
// cache of bf16 weight copies, which the optimizer step would otherwise leave stale.
class AutocastScope {
 public:
  AutocastScope(torch::Device device, bool enabled);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  AutocastScope(AutocastScope&&) = delete;
  AutocastScope& operator=(AutocastScope&&) = delete;

 private:
  bool enabled_;
  bool cuda_;
  bool was_enabled_ = false;
  at::ScalarType old_dtype_ = at::kBFloat16;
};

}  // namespace autoloco
