// The unsharded inner step and ZeRO stage 1 (topology.shard none and optimizer); stage 2 is in
// gradient_shard.cpp.
#include "autoloco/train/inner_shard.hpp"

#include <algorithm>
#include <cmath>

#include "autoloco/optim/adamw.hpp"
#include "autoloco/train/gradient_shard.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

// Collective pieces: each member's count stays far below an int (MPI) and a piece's buffers
// stay small.
constexpr int64_t kGatherPieceNumel = int64_t{1} << 26;

class NoShard final : public InnerShard {
 public:
  NoShard(FlatParams& params, GradientSync& sync)
      : InnerShard(ShardMode::none, ShardSpan(params.numel(), 1, 0)),
        params_(params),
        sync_(sync) {}

  FlatView view() override { return params_.view(); }
  void reduce(int64_t step) override { sync_.run(params_, step); }
  torch::Tensor clip(double max_norm) override { return clip_grad_norm_async(params_, max_norm); }
  int64_t gradient_bytes() const override { return 4 * params_.numel(); }

 private:
  FlatParams& params_;
  GradientSync& sync_;
};

// ZeRO stage 1: the whole gradient exists after backward; the mean of each member's shard of it
// comes back from a reduce-scatter, bucket by bucket (or, where the whole mean is needed, from
// the unsharded all-reduce).
class OptimizerShard final : public InnerShard {
 public:
  OptimizerShard(FlatParams& params, Communicator& intra, GradientSync& sync, ShardSpan span,
                 bool full_gradient)
      : InnerShard(ShardMode::optimizer, span),
        params_(params),
        intra_(intra),
        sync_(sync),
        full_gradient_(full_gradient) {}

  FlatView view() override {
    return params_.shard_view(span().begin(), span().count(),
                              params_.grads().narrow(0, span().begin(), span().count()));
  }

  void reduce(int64_t step) override {
    if (full_gradient_) {
      sync_.run(params_, step);
      return;
    }
    torch::NoGradGuard no_grad;
    const Watch watch("the intra-dc gradient reduce-scatter");
    torch::Tensor& grads = params_.grads();
    const int64_t n = grads.numel();
    for (int64_t begin = 0; begin < n; begin += kGradientBucketNumel) {
      const int64_t count = std::min(kGradientBucketNumel, n - begin);
      reduce_bucket(grads, begin, count);
    }
    view().grads.div_(span().members);
  }

  torch::Tensor clip(double max_norm) override {
    torch::Tensor g = view().grads;
    return clip_sharded(g, max_norm, intra_);
  }

  void refresh() override { allgather_shards(params_.values(), span(), intra_); }

  int64_t gradient_bytes() const override { return 4 * params_.numel(); }
  int64_t buffer_bytes() const override { return scratch_.defined() ? 4 * scratch_.numel() : 0; }

 private:
  // grads[begin, begin + count) summed over the members, of which this member's part lands in
  // its shard of grads.
  void reduce_bucket(torch::Tensor& grads, int64_t begin, int64_t count) {
    const std::vector<size_t> counts = span().split(begin, count);
    const auto mine = static_cast<int64_t>(counts[static_cast<size_t>(span().member)]);
    const auto most = static_cast<int64_t>(*std::max_element(counts.begin(), counts.end()));
    if (!scratch_.defined() || scratch_.numel() < most) {
      scratch_ = torch::empty({most}, grads.options());
    }
    intra_.reduce_scatter_sum(grads.data_ptr<float>() + begin, scratch_.data_ptr<float>(), counts,
                              DType::f32);
    if (mine == 0) return;
    const int64_t at = std::max(begin, span().begin());
    grads.narrow(0, at, mine).copy_(scratch_.narrow(0, 0, mine));
  }

  FlatParams& params_;
  Communicator& intra_;
  GradientSync& sync_;
  bool full_gradient_;
  torch::Tensor scratch_;  // a bucket's largest part: a reduce-scatter's output may not alias
                           // its input
};

}  // namespace

ShardMode parse_shard_mode(const std::string& name) {
  if (name == "none") return ShardMode::none;
  if (name == "optimizer") return ShardMode::optimizer;
  if (name == "gradients") return ShardMode::gradients;
  if (name == "full") return ShardMode::full;
  throw ConfigError("config key topology.shard: unknown mode '" + name +
                    "'; use none, optimizer, gradients or full");
}

const char* shard_mode_name(ShardMode mode) {
  switch (mode) {
    case ShardMode::none:
      return "none";
    case ShardMode::optimizer:
      return "optimizer";
    case ShardMode::gradients:
      return "gradients";
    case ShardMode::full:
      return "full";
  }
  return "?";
}

ShardMode effective_shard_mode(ShardMode configured, int members, bool needs_full_gradient) {
  if (members == 1) return ShardMode::none;
  if (configured == ShardMode::gradients && needs_full_gradient) return ShardMode::optimizer;
  return configured;
}

std::unique_ptr<InnerShard> make_inner_shard(ShardMode mode, FlatParams& params,
                                             Communicator& intra, GradientSync& sync,
                                             bool needs_full_gradient) {
  const ShardSpan span(params.numel(), intra.size(), intra.rank());
  switch (mode) {
    case ShardMode::none:
      return std::make_unique<NoShard>(params, sync);
    case ShardMode::optimizer:
      return std::make_unique<OptimizerShard>(params, intra, sync, span, needs_full_gradient);
    case ShardMode::gradients:
      return make_gradient_shard(params, intra, span);
    case ShardMode::full:
      break;
  }
  throw Error("make_inner_shard: unknown mode");
}

void allgather_shards(torch::Tensor& values, const ShardSpan& span, Communicator& intra) {
  std::vector<std::vector<FlatRange>> ranges;
  for (int m = 0; m < span.members; ++m)
    ranges.push_back({{span.begin_of(m), span.count_of(m)}});
  allgather_ranges(values, ranges, intra);
}

void allgather_ranges(torch::Tensor& values, const std::vector<std::vector<FlatRange>>& ranges,
                      Communicator& intra) {
  if (intra.size() == 1) return;
  torch::NoGradGuard no_grad;
  const Watch watch("the intra-dc all-gather of the replica's shards");
  // Each member's runs in pieces; the j-th pieces of all members go in one collective.
  std::vector<std::vector<FlatRange>> pieces(ranges.size());
  size_t most = 0;
  for (size_t m = 0; m < ranges.size(); ++m) {
    for (const FlatRange& r : ranges[m]) {
      for (int64_t done = 0; done < r.numel; done += kGatherPieceNumel)
        pieces[m].push_back({r.offset + done, std::min(kGatherPieceNumel, r.numel - done)});
    }
    most = std::max(most, pieces[m].size());
  }
  float* data = values.data_ptr<float>();
  for (size_t j = 0; j < most; ++j) {
    std::vector<size_t> counts;
    std::vector<size_t> offsets;
    size_t anywhere = 0;  // an empty part's offset: one of the others', so displacements stay small
    for (const auto& p : pieces) {
      if (j < p.size()) anywhere = static_cast<size_t>(p[j].offset);
    }
    for (const auto& p : pieces) {
      counts.push_back(j < p.size() ? static_cast<size_t>(p[j].numel) : 0);
      offsets.push_back(j < p.size() ? static_cast<size_t>(p[j].offset) : anywhere);
    }
    intra.allgather_in_place(data, counts, offsets, DType::f32);
  }
}

torch::Tensor clip_sharded(torch::Tensor& shard, double max_norm, Communicator& intra) {
  torch::NoGradGuard no_grad;
  // Each shard's norm as the unsharded step takes the whole one's (no copy of the shard), the
  // squares summed over the members in double.
  torch::Tensor sq = shard.norm().to(torch::kDouble).pow(2);
  {
    const Watch watch("the intra-dc all-reduce of the gradient norm");
    intra.allreduce_sum(sq.data_ptr<double>(), 1);
  }
  torch::Tensor norm = sq.sqrt();
  if (!shard.is_cuda()) {
    const double n = norm.item<double>();
    if (max_norm > 0.0) {
      const double scale = max_norm / (n + 1e-6);
      if (scale < 1.0) shard.mul_(scale);
    }
    return torch::full({}, n, shard.options());
  }
  torch::Tensor norm_f = norm.to(torch::kFloat);
  if (max_norm > 0.0) shard.mul_((max_norm / (norm_f + 1e-6)).clamp_max(1.0));
  return norm_f;
}

}  // namespace autoloco
