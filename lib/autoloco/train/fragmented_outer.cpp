#include "autoloco/train/fragmented_outer.hpp"

#include "autoloco/train/inner_shard.hpp"

namespace autoloco {
namespace {

FragmentPlan make_plan(const FlatParams& params, int64_t fragments) {
  if (fragments <= 1) return FragmentPlan(params.numel());
  return FragmentPlan(params.slices(), fragments);
}

}  // namespace

FragmentedOuter::FragmentedOuter(const Config& config, FlatParams& params,
                                 HierarchicalAllreduce& reducer, WanLink& link,
                                 torch::Device state_device, OuterSharding sharding)
    : plan_(make_plan(params, config.outer.fragments)), sharding_(sharding) {
  for (size_t p = 0; p < plan_.size(); ++p) {
    syncs_.push_back(std::make_unique<OuterSync>(config.outer, config.interval.H, params, plan_, p,
                                                 reducer, link, state_device,
                                                 static_cast<uint64_t>(config.run.seed), sharding));
    if (config.elastic.enabled()) syncs_.back()->set_dc_slots(static_cast<int>(config.elastic.dcs));
  }
}

void FragmentedOuter::whole_into(torch::Tensor& flat,
                                 const std::function<torch::Tensor(size_t)>& part) const {
  torch::NoGradGuard no_grad;
  for (size_t p = 0; p < syncs_.size(); ++p) {
    const torch::Tensor mine = part(p);
    if (mine.defined()) plan_.scatter(mine, p, syncs_[p]->span().begin(), flat);
  }
  if (!sharding_.sharded) return;
  std::vector<std::vector<FlatRange>> ranges(static_cast<size_t>(syncs_[0]->span().members));
  for (size_t p = 0; p < syncs_.size(); ++p) {
    const ShardSpan& span = syncs_[p]->span();
    for (int m = 0; m < span.members; ++m) {
      for (const FlatRange& r : plan_.ranges(p, span.begin_of(m), span.count_of(m)))
        ranges[static_cast<size_t>(m)].push_back(r);
    }
  }
  allgather_ranges(flat, ranges, flat.is_cuda() ? *sharding_.replica : *sharding_.host);
}

void FragmentedOuter::anchor_into(torch::Tensor& flat) const {
  whole_into(flat, [&](size_t p) { return syncs_[p]->anchor(); });
}

void FragmentedOuter::anchor_into(FlatParams& params) {
  if (!sharding_.full) {
    anchor_into(params.values());
    return;
  }
  for (auto& sync : syncs_)
    sync->merge(params, 0.0);
}

torch::Tensor FragmentedOuter::anchor() const {
  if (sharding_.sharded) {
    torch::Tensor whole = torch::zeros({plan_.numel()}, syncs_[0]->anchor().options());
    anchor_into(whole);
    return whole;
  }
  if (plan_.whole()) return syncs_[0]->anchor();
  const torch::Tensor& first = syncs_[0]->anchor();
  torch::Tensor whole = torch::empty({plan_.numel()}, first.options());
  for (size_t p = 0; p < syncs_.size(); ++p)
    plan_.scatter(syncs_[p]->anchor(), p, whole);
  return whole;
}

void FragmentedOuter::load_anchor(const torch::Tensor& whole) {
  torch::NoGradGuard no_grad;
  for (size_t p = 0; p < syncs_.size(); ++p) {
    const ShardSpan& span = syncs_[p]->span();
    syncs_[p]->anchor().copy_(plan_.gather(whole, p, span.begin(), span.count()));
  }
}

std::vector<std::pair<std::string, torch::Tensor>> FragmentedOuter::optimizer_state() const {
  std::vector<std::pair<std::string, torch::Tensor>> out = syncs_[0]->optimizer().state();
  if (plan_.whole() && !sharding_.sharded) return out;
  for (size_t i = 0; i < out.size(); ++i) {
    // A fragment whose optimizer has no such state yet contributes zeros (what it starts from).
    // (The same on every member of a dc: its fragments step together.)
    bool any = false;
    for (const auto& s : syncs_)
      any = any || s->optimizer().state()[i].second.defined();
    torch::Tensor whole = torch::zeros({plan_.numel()}, syncs_[0]->anchor().options());
    whole_into(whole, [&](size_t p) { return syncs_[p]->optimizer().state()[i].second; });
    out[i].second = any ? whole : torch::Tensor();
  }
  return out;
}

void FragmentedOuter::load_optimizer_state(const std::string& name, const torch::Tensor& whole) {
  for (size_t p = 0; p < syncs_.size(); ++p) {
    const ShardSpan& span = syncs_[p]->span();
    const torch::Tensor part =
        whole.defined() ? plan_.gather(whole, p, span.begin(), span.count()) : whole;
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
