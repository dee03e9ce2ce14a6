// The inter-dc exchange of SparseLoCo's sparse wire (sparse_codec.hpp; Sarfi et al., arXiv
// 2508.15706): a sum of sparse vectors is not sparse, so instead of an all-reduce each rank sends
// its whole encoded contribution, with the round's scalars, to every other rank, and every rank
// decodes the G contributions and adds them in fp32 in rank order. All ranks so end with the same
// bits from the same bytes; each sends G - 1 copies of its encoding, in one phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "autoloco/comm/link_traffic.hpp"
#include "autoloco/comm/peer_exchange.hpp"
#include "autoloco/comm/sparse_codec.hpp"

namespace autoloco {

class SparseAllgather {
 public:
  // Over `peers` (which must outlive it; its rank and size are read at each run).
  explicit SparseAllgather(PeerExchange& peers) : peers_(&peers) {}

  // In place: payload (count floats) and scalars (k doubles) become their sums over the ranks,
  // each rank's payload taken as its sparse encoding. `stream` seeds stochastic rounding (mixed
  // with the rank). With `residual` (count floats) it receives what this rank's encoding left
  // out or rounded away: payload − its decoding (error feedback).
  LinkTraffic run(float* payload, size_t count, const SparseCodec& codec, double* scalars, size_t k,
                  uint64_t stream, float* residual = nullptr);
  // The traffic of run() on this rank, computed without running it.
  LinkTraffic traffic(size_t count, const SparseCodec& codec, size_t k) const;
  // The bytes every rank received in the last run, rank by rank (every rank holds the same).
  const std::vector<std::vector<std::byte>>& received() const { return in_; }

 private:
  void exchange(size_t bytes);

  PeerExchange* peers_;
  std::vector<std::vector<std::byte>> in_;  // per rank, this rank's own included
};

}  // namespace autoloco
