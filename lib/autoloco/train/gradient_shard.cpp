#include "autoloco/train/gradient_shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "autoloco/util/error.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

// A run of whole parameters of the flat buffer, reduce-scattered as one message once all of
// their gradients of a micro-batch have arrived.
struct Bucket {
  int64_t begin = 0;
  int64_t numel = 0;
  int64_t filled = 0;    // elements of this micro-batch's gradients copied in
  int64_t sent = 0;      // reduce-scatters of this step
  torch::Tensor buffer;  // while filling: a pooled tensor of at least numel elements
};

class GradientShard final : public InnerShard {
 public:
  GradientShard(FlatParams& params, Communicator& intra, ShardSpan span)
      : InnerShard(ShardMode::gradients, span), params_(params), intra_(intra) {
    if (params.flat_grads()) {
      throw Error("topology.shard gradients: the parameters keep a flat gradient buffer");
    }
    const torch::Tensor& values = params.values();
    shard_grads_ = torch::zeros({span.count()}, values.options());
    plan_buckets();
    const auto& parameters = params.parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      torch::Tensor p = parameters[i];
      p.register_hook([this, i](const torch::Tensor& grad) { on_gradient(i, grad); });
    }
  }

  FlatView view() override {
    return params_.shard_view(span().begin(), span().count(), shard_grads_);
  }

  void begin_step() override {
    torch::NoGradGuard no_grad;
    shard_grads_.zero_();
    for (Bucket& b : buckets_)
      b.sent = 0;
  }

  void reduce(int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    free_gradients();
    check_all_sent();
    shard_grads_.div_(span().members);
  }

  torch::Tensor clip(double max_norm) override {
    return clip_sharded(shard_grads_, max_norm, intra_);
  }

  void refresh() override { allgather_shards(params_.values(), span(), intra_); }

  int64_t gradient_bytes() const override { return 4 * shard_grads_.numel(); }
  int64_t buffer_bytes() const override {
    int64_t numel = scratch_.defined() ? scratch_.numel() : 0;
    for (const torch::Tensor& t : pool_)
      numel += t.numel();
    for (const Bucket& b : buckets_)
      numel += b.buffer.defined() ? b.buffer.numel() : 0;
    return 4 * numel;
  }

 private:
  // Whole parameters in flat order, up to kGradientBucketNumel elements a bucket; a larger
  // parameter is a bucket of its own.
  void plan_buckets() {
    const auto& slices = params_.slices();
    for (size_t i = 0; i < slices.size(); ++i) {
      const ParamSlice& s = slices[i];
      if (buckets_.empty() || buckets_.back().numel + s.numel > kGradientBucketNumel) {
        Bucket b;
        b.begin = s.offset;
        buckets_.push_back(b);
      }
      buckets_.back().numel += s.numel;
      bucket_of_.push_back(buckets_.size() - 1);
    }
  }

  // Autograd calls this with a parameter's gradient of one micro-batch just before storing it
  // in .grad(); the earlier parameters' gradients are stored by then, and copied: free them.
  void on_gradient(size_t param, const torch::Tensor& grad) {
    torch::NoGradGuard no_grad;
    free_gradients();
    Bucket& b = buckets_[bucket_of_[param]];
    const ParamSlice& s = params_.slices()[param];
    if (!b.buffer.defined()) b.buffer = take_buffer(b.numel, grad.options());
    b.buffer.narrow(0, s.offset - b.begin, s.numel).copy_(grad.reshape({-1}));
    stored_.push_back(param);
    b.filled += s.numel;
    if (b.filled == b.numel) send(b);
  }

  void send(Bucket& b) {
    const Watch watch("the intra-dc gradient reduce-scatter (in backward)");
    const std::vector<size_t> counts = span().split(b.begin, b.numel);
    const auto mine = static_cast<int64_t>(counts[static_cast<size_t>(span().member)]);
    const int64_t most = static_cast<int64_t>(*std::max_element(counts.begin(), counts.end()));
    if (!scratch_.defined() || scratch_.numel() < most) {
      scratch_ = torch::empty({most}, b.buffer.options());
    }
    intra_.reduce_scatter_sum(b.buffer.data_ptr<float>(), scratch_.data_ptr<float>(), counts,
                              DType::f32);
    if (mine > 0) {
      const int64_t at = std::max(b.begin, span().begin()) - span().begin();
      shard_grads_.narrow(0, at, mine).add_(scratch_.narrow(0, 0, mine));
    }
    pool_.push_back(b.buffer);
    b.buffer = torch::Tensor();
    b.filled = 0;
    ++b.sent;
  }

  torch::Tensor take_buffer(int64_t numel, const torch::TensorOptions& options) {
    for (size_t i = 0; i < pool_.size(); ++i) {
      if (pool_[i].numel() >= numel) {
        torch::Tensor t = pool_[i];
        pool_.erase(pool_.begin() + static_cast<std::ptrdiff_t>(i));
        return t;
      }
    }
    return torch::empty({std::max(numel, kGradientBucketNumel)}, options);
  }

  void free_gradients() {
    const auto& parameters = params_.parameters();
    for (const size_t i : stored_) {
      torch::Tensor p = parameters[i];
      p.mutable_grad().reset();
    }
    stored_.clear();
  }

  // Every bucket went the same number of times (once per micro-batch): a parameter that got no
  // gradient would hold its bucket back and leave the members' sums incomplete.
  void check_all_sent() const {
    const int64_t times = buckets_.front().sent;
    for (size_t k = 0; k < buckets_.size(); ++k) {
      const Bucket& b = buckets_[k];
      if (b.filled == 0 && b.sent == times && times > 0) continue;
      std::string missing;
      for (size_t i = 0; i < bucket_of_.size(); ++i) {
        if (bucket_of_[i] == k) missing += (missing.empty() ? "" : ", ") + params_.slices()[i].name;
      }
      throw Error(fmt::format(
          "topology.shard gradients: the gradient bucket of {} was not complete after backward "
          "({} of its {} values arrived): every parameter must get a gradient in every "
          "micro-batch; use topology.shard optimizer for a model with unused parameters",
          missing, b.filled, b.numel));
    }
  }

  FlatParams& params_;
  Communicator& intra_;
  torch::Tensor shard_grads_;  // this member's shard of the mean gradient
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;    // per parameter (slices() order)
  std::vector<size_t> stored_;       // parameters whose gradient autograd holds now
  std::vector<torch::Tensor> pool_;  // bucket buffers not in use
  torch::Tensor scratch_;            // a reduce-scatter's output (it may not alias its input)
};

}  // namespace

std::unique_ptr<InnerShard> make_gradient_shard(FlatParams& params, Communicator& intra,
                                                ShardSpan span) {
  return std::make_unique<GradientShard>(params, intra, span);
}

}  // namespace autoloco
