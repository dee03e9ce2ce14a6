// The sharding seam of an inner step (topology.shard; ZeRO stages 1 and 2, Rajbhandari et al.
// 2020; docs/sharding.md): one object per model instance and rank that owns what its member
// keeps of the gradient and of the optimizer's view, and the intra-dc collectives that move
// them. The Trainer asks it for each part of a step and never branches on the mode:
//   none       every member all-reduces the whole gradient and steps the whole buffer;
//   optimizer  the whole gradient is reduce-scattered (bucket by bucket) after backward, the
//              member steps its shard with its shard of the AdamW moments, and an all-gather
//              refreshes the replica;
//   gradients  as optimizer, but each bucket is reduce-scattered in backward as soon as its
//              parameters' gradients exist, and those gradients are freed: no member keeps
//              the whole gradient.
//   full       the parameters too (full_shard.hpp): each unit gathered for its forward and its
//              backward, its gradient reduce-scattered in backward.
// A dc of one rank, and a run whose batch controller needs the whole mean gradient (AdLoCo's
// noise test), keeps the whole gradient: gradients behaves as optimizer there; full refuses such
// a batch controller.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/shard_span.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/fragment_plan.hpp"
#include "autoloco/train/gradient_sync.hpp"

namespace autoloco {

enum class ShardMode { none, optimizer, gradients, full };

ShardMode parse_shard_mode(const std::string& name);
const char* shard_mode_name(ShardMode mode);

// The mode an instance runs: `configured` (topology.shard) as far as the dc and the batch
// controller allow (above).
ShardMode effective_shard_mode(ShardMode configured, int members, bool needs_full_gradient);

// Whether FlatParams keeps a flat gradient buffer under `mode` (none and optimizer).
inline bool keeps_flat_gradient(ShardMode mode) {
  return mode == ShardMode::none || mode == ShardMode::optimizer;
}

class InnerShard {
 public:
  virtual ~InnerShard() = default;

  ShardMode mode() const { return mode_; }
  // Which elements of the flat buffer this member keeps (all of them unsharded).
  const ShardSpan& span() const { return span_; }
  // What this member's inner optimizer steps: the whole buffer, or its shard.
  virtual FlatView view() = 0;

  // Before a step's forward and backward.
  virtual void begin_step() {}
  // After them: view().grads holds the dc's mean gradient (ddp: the world's), and under none
  // and optimizer-with-a-full-gradient, params.grads() all of it.
  virtual void reduce(int64_t step) = 0;
  // The norm of the whole mean gradient (every member the same value) as a 0-dim float on the
  // gradients' device, with view().grads scaled to at most max_norm (> 0) as
  // torch::nn::utils::clip_grad_norm_ does.
  virtual torch::Tensor clip(double max_norm) = 0;
  // After the optimizer stepped view(): the member's replica whole again.
  virtual void refresh() {}

  // Whether the shard takes the adaptive batch's gradient samples itself (full: no member holds
  // a whole gradient), and then, after reduce(), their products as GradientSamples::products
  // gives them: ‖ḡ‖², ‖g‖², ⟨g,ḡ⟩ of this member's own gradient g, as kDouble on the device.
  virtual bool takes_samples() const { return false; }
  virtual torch::Tensor sample_products() { return {}; }

  // Bytes this member keeps of the gradient, and of the buffers the sharding adds.
  virtual int64_t gradient_bytes() const = 0;
  virtual int64_t buffer_bytes() const { return 0; }

 protected:
  InnerShard(ShardMode mode, ShardSpan span) : mode_(mode), span_(span) {}

 private:
  ShardMode mode_;
  ShardSpan span_;
};

// `mode` as effective_shard_mode gives it, but not full (make_full_shard). `intra` moves gradients
// and values inside the dc (NCCL on GPUs, else MPI); `sync` is the unsharded all-reduce (and ddp's
// path across dcs), used under none and, with `needs_full_gradient`, under optimizer too. `params`
// must have been built with keeps_flat_gradient(mode).
std::unique_ptr<InnerShard> make_inner_shard(ShardMode mode, FlatParams& params,
                                             Communicator& intra, GradientSync& sync,
                                             bool needs_full_gradient);

// The all-gather of a shard ("refresh"): every member's span of `values` (a flat buffer of
// span.numel elements on every member) lands on every member, in pieces whose counts fit MPI's.
void allgather_shards(torch::Tensor& values, const ShardSpan& span, Communicator& intra);
// The same for member m's elements at ranges[m] (disjoint runs of `values`).
void allgather_ranges(torch::Tensor& values, const std::vector<std::vector<FlatRange>>& ranges,
                      Communicator& intra);

// The norm of a gradient sharded over `intra`'s members (each holds `shard`), and each shard
// clipped by the same scale: the clip of the whole vector, up to the order of its sum.
torch::Tensor clip_sharded(torch::Tensor& shard, double max_norm, Communicator& intra);

// Buckets of the intra-dc gradient collectives: 16 MiB of fp32, so that a huge model never needs
// one huge message and a bucket can go while backward produces the next.
constexpr int64_t kGradientBucketNumel = int64_t{1} << 22;

}  // namespace autoloco
