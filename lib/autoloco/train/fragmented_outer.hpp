// The outer state of every fragment (outer.fragments, Streaming DiLoCo): one OuterSync per
// fragment of the plan, each with its slice of the anchor and of the outer momentum, and the
// views that the Trainer and checkpoints need of them as whole flat buffers in the parameters'
// order, so that checkpoints do not depend on the number of fragments. With one fragment it is
// the single OuterSync of plain DiLoCo and the views are its own tensors.
#pragma once

#include <functional>

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/train/outer_sync.hpp"

namespace autoloco {

class FragmentedOuter {
 public:
  FragmentedOuter(const Config& config, FlatParams& params, HierarchicalAllreduce& reducer,
                  WanLink& link, torch::Device state_device, OuterSharding sharding = {});

  size_t size() const { return syncs_.size(); }
  OuterSync& at(int64_t fragment) { return *syncs_.at(static_cast<size_t>(fragment)); }
  const FragmentPlan& plan() const { return plan_; }

  // The whole anchor in the parameters' order (the fragment's own tensor for one fragment, else
  // a copy). Sharded (topology.shard), each member holds a shard: then it is gathered, and every
  // member of the dc calls it together.
  torch::Tensor anchor() const;
  // The same into `flat` (a buffer of the parameters' size, e.g. the replica).
  void anchor_into(torch::Tensor& flat) const;
  // The anchor into the replica's values (kept ones, under topology.shard full); every member of
  // the dc calls it together.
  void anchor_into(FlatParams& params);
  void load_anchor(const torch::Tensor& whole);
  // The outer optimizer's state tensors, each whole in the parameters' order (undefined when no
  // fragment has one yet; gathered as anchor() when sharded), and back.
  std::vector<std::pair<std::string, torch::Tensor>> optimizer_state() const;
  void load_optimizer_state(const std::string& name, const torch::Tensor& whole);
  bool sharded() const { return sharding_.sharded; }
  // The optimizer of the fragment that stepped last (its lr and momentum go to the logs).
  const OuterOptimizer& last_optimizer() const { return syncs_[last_]->optimizer(); }
  void stepped(int64_t fragment) { last_ = static_cast<size_t>(fragment); }

  int64_t buffer_bytes() const;
  // The start log's lines: the assignment of the parameters to fragments.
  std::vector<std::string> describe() const { return plan_.describe(); }

 private:
  // Each fragment's `part(p)` (this member's elements of it) into `flat`, then gathered from the
  // other members when sharded.
  void whole_into(torch::Tensor& flat, const std::function<torch::Tensor(size_t)>& part) const;

  FragmentPlan plan_;
  OuterSharding sharding_;
  std::vector<std::unique_ptr<OuterSync>> syncs_;
  size_t last_ = 0;
};

}  // namespace autoloco
