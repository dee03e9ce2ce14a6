#include "autoloco/train/replica_exchange.hpp"

#include <algorithm>
#include <numeric>

#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

// The runs of `ranges` inside [begin, end), shifted by −begin.
std::vector<FlatRange> inside(const std::vector<FlatRange>& ranges, int64_t begin, int64_t end) {
  std::vector<FlatRange> out;
  for (const FlatRange& r : ranges) {
    const int64_t lo = std::max(r.offset, begin);
    const int64_t hi = std::min(r.end(), end);
    if (lo < hi) out.push_back({lo - begin, hi - lo});
  }
  return out;
}

int64_t total(const std::vector<FlatRange>& ranges) {
  int64_t n = 0;
  for (const FlatRange& r : ranges)
    n += r.numel;
  return n;
}

torch::Tensor pack(const torch::Tensor& flat, const std::vector<std::vector<FlatRange>>& runs) {
  std::vector<torch::Tensor> parts;
  for (const auto& rs : runs) {
    for (const FlatRange& r : rs)
      parts.push_back(flat.narrow(0, r.offset, r.numel));
  }
  if (parts.empty()) return torch::empty({0}, flat.options());
  return torch::cat(parts);
}

}  // namespace

ReplicaExchange::ReplicaExchange(const FragmentPlan& plan, size_t fragment, const ShardSpan& outer,
                                 const ShardSpan& kept) {
  const int64_t mine_begin = kept.begin();
  const int64_t mine_end = kept.begin() + kept.count();
  const std::vector<FlatRange> mine = plan.ranges(fragment, outer.begin(), outer.count());
  count_ = outer.count();
  for (int q = 0; q < outer.members; ++q) {
    const std::vector<FlatRange> their_part =
        plan.ranges(fragment, outer.begin_of(q), outer.count_of(q));
    theirs_.push_back(inside(their_part, mine_begin, mine_end));
    to_them_.push_back(static_cast<size_t>(total(theirs_.back())));
    // Ascending runs split at the owners' boundaries: owner by owner, they are `mine` in order.
    to_me_.push_back(static_cast<size_t>(
        total(inside(mine, kept.begin_of(q), kept.begin_of(q) + kept.count_of(q)))));
    // Every member must come to the same answer: the all-to-all is collective.
    for (int o = 0; o < outer.members; ++o) {
      if (o != q &&
          total(inside(their_part, kept.begin_of(o), kept.begin_of(o) + kept.count_of(o))) > 0) {
        local_ = false;
      }
    }
  }
  own_ = theirs_[static_cast<size_t>(outer.member)];
}

torch::Tensor ReplicaExchange::fetch(const torch::Tensor& kept, Communicator& comm) const {
  torch::NoGradGuard no_grad;
  if (local_) return pack(kept, {own_});
  const Watch watch("the intra-dc all-to-all of the replica's outer part (topology.shard full)");
  const torch::Tensor out_going = pack(kept, theirs_);
  torch::Tensor in_coming = torch::empty({count_}, kept.options());
  comm.alltoallv(out_going.data_ptr<float>(), to_them_, in_coming.data_ptr<float>(), to_me_,
                 DType::f32);
  return in_coming;
}

void ReplicaExchange::store(const torch::Tensor& part, double alpha, torch::Tensor& kept,
                            Communicator& comm) const {
  torch::NoGradGuard no_grad;
  torch::Tensor in_coming = part;
  std::vector<std::vector<FlatRange>> where = {own_};
  if (!local_) {
    const Watch watch("the intra-dc all-to-all of the new anchor (topology.shard full)");
    const torch::Tensor out_going = part.contiguous();
    in_coming = torch::empty(
        {static_cast<int64_t>(std::accumulate(to_them_.begin(), to_them_.end(), size_t{0}))},
        kept.options());
    comm.alltoallv(out_going.data_ptr<float>(), to_me_, in_coming.data_ptr<float>(), to_them_,
                   DType::f32);
    where = theirs_;
  }
  int64_t at = 0;
  for (const auto& rs : where) {
    for (const FlatRange& r : rs) {
      torch::Tensor slot = kept.narrow(0, r.offset, r.numel);
      const torch::Tensor value = in_coming.narrow(0, at, r.numel);
      if (alpha == 0.0) {
        slot.copy_(value);
      } else {
        slot.mul_(alpha).add_(value, 1.0 - alpha);
      }
      at += r.numel;
    }
  }
}

}  // namespace autoloco
