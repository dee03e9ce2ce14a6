// The inter-dc all-reduce of the block formats (fp8, int8, int4, e3m0; wire_format.hpp), so that
// each dc's contribution is rounded once and the sum once (ALGORITHMS.md §4):
//   scatter  each of the G ranks splits the payload into G chunks, encodes every chunk once
//            and sends chunk j (with the round's scalars, as doubles) to rank j
//   reduce   rank j decodes the G encodings of its chunk, its own included, and sums them in
//            fp32 in rank order
//   gather   rank j encodes the sum once and sends it to every other rank; every rank decodes
//            every chunk from those bytes (the owner from its own), so all end with the same bits
// The scalars' sums are taken by every rank in rank order, so they agree too. Each rank sends
// about 2 (G - 1) / G of the encoded payload, as a ring would, in two phases instead of 2 (G - 1).
#pragma once

#include <cstddef>
#include <vector>

#include "autoloco/comm/chunks.hpp"
#include "autoloco/comm/link_traffic.hpp"
#include "autoloco/comm/peer_exchange.hpp"
#include "autoloco/comm/wire_format.hpp"

namespace autoloco {

class CompressedAllreduce {
 public:
  // Over `peers` (which must outlive it; its rank and size are read at each run).
  explicit CompressedAllreduce(PeerExchange& peers) : peers_(&peers) {}

  // In place: payload (count floats) and scalars (k doubles) become their sums over the ranks.
  // `stream` seeds stochastic rounding (mixed with the rank and the chunk). With `residual`
  // (count floats) it receives what rounding this rank's contribution lost, payload − its
  // decoded encoding (outer.error_feedback). Returns the traffic, with the bytes this rank sent
  // as counted.
  LinkTraffic run(float* payload, size_t count, const WireCodec& codec, double* scalars, size_t k,
                  uint64_t stream, float* residual = nullptr);
  // The traffic of run() on this rank, computed without running it.
  LinkTraffic traffic(size_t count, const WireCodec& codec, size_t k) const;

 private:
  Chunk chunk(size_t c, size_t count) const {
    return chunk_of(c, count, static_cast<size_t>(peers_->size()));
  }
  void scatter(const float* payload, size_t count, const WireCodec& codec, const double* scalars,
               size_t k, uint64_t stream);
  // residual <- payload − the decoding of this rank's encodings (after scatter).
  void keep_residual(const float* payload, size_t count, const WireCodec& codec, float* residual);
  void gather(float* payload, size_t count, const WireCodec& codec, uint64_t stream);

  PeerExchange* peers_;
  int64_t sent_ = 0;
  std::vector<std::vector<std::byte>> out_;  // per peer (scatter) or one (gather)
  std::vector<std::vector<std::byte>> in_;   // per peer
  std::vector<float> sum_;
};

}  // namespace autoloco
