#include "autoloco/train/full_shard.hpp"

#include "autoloco/train/gathered_units.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

class FullShard final : public InnerShard {
 public:
  FullShard(DecoderImpl& model, FlatParams& params, Communicator& intra, ShardSpan span,
            Recompute recompute, bool bf16, bool samples)
      : InnerShard(ShardMode::full, span),
        params_(params),
        intra_(intra),
        grads_(torch::zeros({span.count()}, params.values().options())),
        pieces_(samples ? torch::zeros({span.members, span.count()}, params.values().options())
                        : torch::Tensor()),
        units_(std::make_shared<GatheredUnits>(model, params, intra, span, grads_, recompute, bf16,
                                               pieces_)) {
    model.set_runner(units_);
  }

  FlatView view() override { return params_.shard_view(span().begin(), span().count(), grads_); }

  void begin_step() override {
    torch::NoGradGuard no_grad;
    grads_.zero_();
    if (pieces_.defined()) pieces_.zero_();
    units_->begin_step();
  }

  void reduce(int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    units_->check_reduced();
    units_->await_reductions();
    if (pieces_.defined()) torch::sum_out(grads_, pieces_, {0});
    grads_.div_(span().members);
  }

  bool takes_samples() const override { return pieces_.defined(); }

  torch::Tensor sample_products() override {
    torch::NoGradGuard no_grad;
    // Over this shard: ‖ḡ‖², then each member's ‖g_m‖² and ⟨g_m,ḡ⟩; summed over the shards,
    // the products of the whole vectors, of which this member keeps its own.
    const int64_t members = span().members;
    std::vector<torch::Tensor> parts = {grads_.dot(grads_).reshape({1})};
    for (int64_t m = 0; m < members; ++m)
      parts.push_back(pieces_[m].dot(pieces_[m]).reshape({1}));
    for (int64_t m = 0; m < members; ++m)
      parts.push_back(pieces_[m].dot(grads_).reshape({1}));
    torch::Tensor sums = torch::cat(parts).to(torch::kDouble);
    {
      const Watch watch("the intra-dc all-reduce of the gradient samples' products");
      intra_.allreduce_sum(sums.data_ptr<double>(), static_cast<size_t>(sums.numel()));
    }
    const int64_t m = span().member;
    return torch::stack({sums[0], sums[1 + m], sums[1 + members + m]});
  }

  torch::Tensor clip(double max_norm) override { return clip_sharded(grads_, max_norm, intra_); }

  int64_t gradient_bytes() const override { return 4 * grads_.numel(); }
  // The batch test's rows are buffers, as the plan counts them (memory_plan.cpp).
  int64_t buffer_bytes() const override {
    return units_->peak_staging_bytes() + units_->scratch_bytes() +
           4 * (pieces_.defined() ? pieces_.numel() : 0);
  }

 private:
  FlatParams& params_;
  Communicator& intra_;
  torch::Tensor grads_;   // this member's shard of the dc's mean gradient
  torch::Tensor pieces_;  // with samples: every member's own gradient on this shard
  std::shared_ptr<GatheredUnits> units_;
};

}  // namespace

std::unique_ptr<InnerShard> make_full_shard(DecoderImpl& model, FlatParams& params,
                                            Communicator& intra, Recompute recompute, bool bf16,
                                            bool samples) {
  const ShardSpan span(params.numel(), intra.size(), intra.rank());
  return std::make_unique<FullShard>(model, params, intra, span, recompute, bf16, samples);
}

}  // namespace autoloco
