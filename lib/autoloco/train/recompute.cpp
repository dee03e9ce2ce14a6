// LibTorch 2.x's custom autograd functions inline IValue and compiled-autograd code in which
// GCC 12's -Wnull-dereference sees paths it cannot rule out (in LibTorch's headers, not here).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wnull-dereference"
#endif
#include "autoloco/train/recompute.hpp"

#include <fmt/format.h>

#include "autoloco/train/precision.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// forward without a graph, keeping the input; backward runs the block again with one and
// back-propagates through it (a re-entrant backward, as torch.utils.checkpoint does).
struct RecomputedBlock : public torch::autograd::Function<RecomputedBlock> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, DecoderImpl* model,
                               int64_t unit, torch::Device device, bool bf16) {
    ctx->save_for_backward({x});
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["unit"] = unit;
    ctx->saved_data["device"] = device;
    ctx->saved_data["bf16"] = bf16;
    return model->run_unit(unit, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* model = reinterpret_cast<DecoderImpl*>(ctx->saved_data["model"].toInt());
    const torch::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    torch::Tensor output;
    {
      const torch::AutoGradMode grad(true);
      const AutocastScope autocast(ctx->saved_data["device"].toDevice(),
                                   ctx->saved_data["bf16"].toBool());
      output = model->run_unit(ctx->saved_data["unit"].toInt(), input);
    }
    torch::autograd::backward({output}, {grads[0]});
    return {input.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

class RecomputeRunner final : public UnitRunner {
 public:
  RecomputeRunner(torch::Device device, bool bf16) : device_(device), bf16_(bf16) {}

  torch::Tensor run(DecoderImpl& model, int64_t unit, const torch::Tensor& x) override {
    // Nothing to keep for a backward that will not come (evaluation, a frozen input).
    if (!model.is_block(unit) || !torch::GradMode::is_enabled() || !x.requires_grad()) {
      return model.run_unit(unit, x);
    }
    return RecomputedBlock::apply(x, &model, unit, device_, bf16_);
  }

 private:
  torch::Device device_;
  bool bf16_;
};

}  // namespace

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "blocks") return Recompute::blocks;
  throw ConfigError(fmt::format(
      "config key model.recompute: '{}' is not a recompute mode: none or blocks", name));
}

std::shared_ptr<UnitRunner> make_recompute_runner(torch::Device device, bool bf16) {
  return std::make_shared<RecomputeRunner>(device, bf16);
}

}  // namespace autoloco
