#include "autoloco/train/full_shard.hpp"

#include "autoloco/train/gathered_units.hpp"

namespace autoloco {
namespace {

class FullShard final : public InnerShard {
 public:
  FullShard(DecoderImpl& model, FlatParams& params, Communicator& intra, ShardSpan span,
            Recompute recompute, bool bf16)
      : InnerShard(ShardMode::full, span),
        params_(params),
        intra_(intra),
        grads_(torch::zeros({span.count()}, params.values().options())),
        units_(
            std::make_shared<GatheredUnits>(model, params, intra, span, grads_, recompute, bf16)) {
    model.set_runner(units_);
  }

  FlatView view() override { return params_.shard_view(span().begin(), span().count(), grads_); }

  void begin_step() override {
    torch::NoGradGuard no_grad;
    grads_.zero_();
    units_->begin_step();
  }

  void reduce(int64_t /*step*/) override {
    torch::NoGradGuard no_grad;
    units_->check_reduced();
    grads_.div_(span().members);
  }

  torch::Tensor clip(double max_norm) override { return clip_sharded(grads_, max_norm, intra_); }

  int64_t gradient_bytes() const override { return 4 * grads_.numel(); }
  int64_t buffer_bytes() const override {
    return units_->peak_staging_bytes() + units_->scratch_bytes();
  }

 private:
  FlatParams& params_;
  Communicator& intra_;
  torch::Tensor grads_;  // this member's shard of the dc's mean gradient
  std::shared_ptr<GatheredUnits> units_;
};

}  // namespace

std::unique_ptr<InnerShard> make_full_shard(DecoderImpl& model, FlatParams& params,
                                            Communicator& intra, Recompute recompute, bool bf16) {
  const ShardSpan span(params.numel(), intra.size(), intra.rank());
  return std::make_unique<FullShard>(model, params, intra, span, recompute, bf16);
}

}  // namespace autoloco
