// The hierarchical all-reduce across datacenters (ALGORITHMS.md §1). Replicas inside a dc are
// identical, so member m of every dc handles shard m of the flat vector: an inter-dc all-reduce
// of that shard among the G ranks with member index m (over the WAN link, with the round's
// scalars in the same message), then an intra-dc all-gather of the reduced shards. Each rank
// sends |vector| / ranks_per_dc over the slow link.
#pragma once

#include <cstddef>
#include <vector>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/packed_message.hpp"
#include "autoloco/comm/wan_link.hpp"

namespace autoloco {

class HierarchicalAllreduce {
 public:
  // `intra` spans this rank's dc (host buffers), `inter` the peers with the same member index.
  HierarchicalAllreduce(Communicator& intra, WanLink& inter);

  // On entry `data` (n floats, host memory) and `scalars` (k doubles) are identical on every
  // member of a dc. On return both hold their sums over the dcs, identical on every rank. The
  // payload travels in the codec's format (summed in fp32); the scalars always in double.
  // `stream` seeds stochastic rounding. With `residual` (shard_size(n, members) floats: this
  // member's shard; block formats only) the shard is sent with the residual added, and the
  // residual becomes what rounding the shard lost (error feedback).
  void allreduce_sum(float* data, size_t n, double* scalars, size_t k, const WireCodec& codec,
                     uint64_t stream = 0, float* residual = nullptr);

  // Sharded (topology.shard): `shard` holds this member's shard_size(n, members) floats of the
  // vector (zero-padded), which every member of the dc keeps apart; only the inter-dc part runs,
  // and `shard` and `scalars` return summed over the dcs.
  void allreduce_shard_sum(float* shard, size_t count, double* scalars, size_t k,
                           const WireCodec& codec, uint64_t stream = 0, float* residual = nullptr);
  // A value summed over the dc's members (on this reducer's communicator, whichever thread owns
  // it).
  double sum_over_members(double value);

  int members() const { return intra_.size(); }
  int member() const { return intra_.rank(); }
  // Elements of each member's shard: ceil(n / members); the last shard is zero-padded.
  static size_t shard_size(size_t n, int members);

 private:
  void reduce_shard(float* shard, size_t count, double* scalars, size_t k, const WireCodec& codec,
                    uint64_t stream, float* residual);

  Communicator& intra_;
  WanLink& inter_;
  std::vector<float> shard_;
  std::vector<float> gathered_;
};

}  // namespace autoloco
