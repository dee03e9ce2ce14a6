#include "autoloco/train/gradient_sync.hpp"

#include <algorithm>

#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

// Gradients cross the intra-dc link in buckets of this many floats (16 MiB), so one huge model
// never needs one huge message and the buckets can later overlap the backward pass.
constexpr int64_t kBucketNumel = int64_t{1} << 22;

}  // namespace

GradientSync::GradientSync(Communicator& intra, HierarchicalAllreduce* across_dcs,
                           const WireCodec& codec, int world_size, uint64_t rounding_seed)
    : intra_(intra),
      across_(across_dcs),
      codec_(codec),
      world_size_(world_size),
      rounding_seed_(rounding_seed) {}

void GradientSync::run(FlatParams& params, int64_t step) {
  torch::NoGradGuard no_grad;
  const Watch watch(across_ != nullptr ? "the gradient all-reduce (intra-dc, then inter-dc)"
                                       : "the intra-dc gradient all-reduce");
  torch::Tensor& grads = params.grads();
  allreduce_intra(grads);
  if (across_ != nullptr) {
    allreduce_across(grads, rounding_stream(rounding_seed_, static_cast<uint64_t>(step)));
    grads.div_(world_size_);
  } else if (intra_.size() > 1) {
    grads.div_(intra_.size());
  }
}

void GradientSync::allreduce_intra(torch::Tensor& grads) {
  if (intra_.size() == 1) return;
  float* data = grads.data_ptr<float>();
  const int64_t n = grads.numel();
  for (int64_t begin = 0; begin < n; begin += kBucketNumel) {
    const int64_t count = std::min(kBucketNumel, n - begin);
    intra_.allreduce_sum(data + begin, static_cast<size_t>(count));
  }
}

void GradientSync::allreduce_across(torch::Tensor& grads, uint64_t stream) {
  if (!grads.is_cuda()) {
    across_->allreduce_sum(grads.data_ptr<float>(), static_cast<size_t>(grads.numel()), nullptr, 0,
                           codec_, stream);
    return;
  }
  // Inter-dc traffic is MPI on host memory: stage through a pinned buffer.
  if (!staging_.defined()) {
    staging_ = torch::empty({grads.numel()},
                            torch::TensorOptions().dtype(torch::kFloat).pinned_memory(true));
  }
  staging_.copy_(grads);
  across_->allreduce_sum(staging_.data_ptr<float>(), static_cast<size_t>(staging_.numel()), nullptr,
                         0, codec_, stream);
  grads.copy_(staging_);
}

}  // namespace autoloco
