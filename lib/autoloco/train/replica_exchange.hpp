// topology.shard full with outer.fragments > 1: the members of a dc split each fragment's outer
// state as they split every vector (member m keeps shard m of the fragment's elements, which
// is what the hierarchical all-reduce gives it), but the replica's parameters as the flat
// buffer (member m keeps shard m of the buffer). The two splits agree for a single fragment;
// for several, a member's outer elements of a fragment lie in other members' parameter shards,
// and one intra-dc all-to-all brings them (fetch, before the pseudo-gradient) and takes them
// back (store, the new anchor into the replica). Each member moves its share of the fragment,
// never the whole model.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <vector>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/shard_span.hpp"
#include "autoloco/optim/fragment_plan.hpp"
#include "autoloco/util/flat_range.hpp"

namespace autoloco {

class ReplicaExchange {
 public:
  // `outer`: how the dc splits fragment `fragment` of `plan`; `kept`: how it splits the
  // parameters (this member keeps kept.begin() .. + kept.count() of the flat buffer).
  ReplicaExchange(const FragmentPlan& plan, size_t fragment, const ShardSpan& outer,
                  const ShardSpan& kept);

  // Every element of this member's outer part is its own: no message is needed.
  bool local() const { return local_; }

  // This member's outer elements of the replica (kept: its parameter shard), in the fragment's
  // order; every member of the dc calls it together.
  torch::Tensor fetch(const torch::Tensor& kept, Communicator& comm) const;
  // kept = alpha kept + (1 − alpha) part, for `part` each member's outer elements in the
  // fragment's order and every element of them that this member keeps.
  void store(const torch::Tensor& part, double alpha, torch::Tensor& kept,
             Communicator& comm) const;

 private:
  // Per member q, the runs of q's outer part that this member keeps, relative to its shard.
  std::vector<std::vector<FlatRange>> theirs_;
  std::vector<size_t> to_them_;  // elements of theirs_[q]
  std::vector<size_t> to_me_;    // per member o: elements of this member's outer part o keeps
  std::vector<FlatRange> own_;   // this member's outer part, relative to its shard (local_)
  int64_t count_ = 0;            // this member's outer elements
  bool local_ = true;
};

}  // namespace autoloco
