#include "autoloco/train/fragmented_outer.hpp"

namespace autoloco {
namespace {

FragmentPlan make_plan(const FlatParams& params, int64_t fragments) {
  if (fragments <= 1) return FragmentPlan(params.numel());
  return FragmentPlan(params.slices(), fragments);
}

}  // namespace

FragmentedOuter::FragmentedOuter(const Config& config, FlatParams& params,
                                 HierarchicalAllreduce& reducer, WanLink& link,
                                 torch::Device state_device)
    : plan_(make_plan(params, config.outer.fragments)) {
  for (size_t p = 0; p < plan_.size(); ++p) {
    syncs_.push_back(std::make_unique<OuterSync>(config.outer, config.interval.H, params, plan_, p,
                                                 reducer, link, state_device,
                                                 static_cast<uint64_t>(config.run.seed)));
  }
}

torch::Tensor FragmentedOuter::anchor() const {
  if (plan_.whole()) return syncs_[0]->anchor();
  const torch::Tensor& first = syncs_[0]->anchor();
  torch::Tensor whole = torch::empty({plan_.numel()}, first.options());
  for (size_t p = 0; p < syncs_.size(); ++p)
    plan_.scatter(syncs_[p]->anchor(), p, whole);
  return whole;
}

void FragmentedOuter::load_anchor(const torch::Tensor& whole) {
  torch::NoGradGuard no_grad;
  for (size_t p = 0; p < syncs_.size(); ++p)
    syncs_[p]->anchor().copy_(plan_.gather(whole, p));
}

std::vector<std::pair<std::string, torch::Tensor>> FragmentedOuter::optimizer_state() const {
  std::vector<std::pair<std::string, torch::Tensor>> out = syncs_[0]->optimizer().state();
  if (plan_.whole()) return out;
  for (size_t i = 0; i < out.size(); ++i) {
    // A fragment whose optimizer has no such state yet contributes zeros (what it starts from).
    bool any = false;
    torch::Tensor whole = torch::zeros({plan_.numel()}, syncs_[0]->anchor().options());
    for (size_t p = 0; p < syncs_.size(); ++p) {
      const torch::Tensor part = syncs_[p]->optimizer().state()[i].second;
      if (!part.defined()) continue;
      plan_.scatter(part, p, whole);
      any = true;
    }
    out[i].second = any ? whole : torch::Tensor();
  }
  return out;
}

void FragmentedOuter::load_optimizer_state(const std::string& name, const torch::Tensor& whole) {
  for (size_t p = 0; p < syncs_.size(); ++p) {
    const torch::Tensor part = whole.defined() ? plan_.gather(whole, p) : whole;
    syncs_[p]->optimizer().load_state(name, part);
  }
}

int64_t FragmentedOuter::buffer_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : syncs_)
    bytes += s->buffer_bytes();
  return bytes;
}

}  // namespace autoloco
