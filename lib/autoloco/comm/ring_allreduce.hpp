// The inter-dc all-reduce: a ring over point-to-point messages (reduce-scatter, then
// all-gather; over MPI or TCP: peer_exchange.hpp), as NCCL and the WAN model's cost formula assume.
// Each of the G ranks sends 2 (G - 1) / G of the payload. Messages carry floats in the wire dtype
// (fp32 or bf16); every partial sum is accumulated in fp32, and each chunk's final value is
// computed once, by its owner, so every rank ends with the same bits. The round's scalars ride as
// doubles with chunk 0 on its way round the ring.
#pragma once

#include <cstddef>
#include <vector>

#include "autoloco/comm/chunks.hpp"
#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/link_traffic.hpp"
#include "autoloco/comm/peer_exchange.hpp"

namespace autoloco {

class RingAllreduce {
 public:
  // Over `peers` (which must outlive it; its rank and size are read at each run, so a group
  // that changes between runs is followed).
  explicit RingAllreduce(PeerExchange& peers) : peers_(&peers) {}

  // In place: payload (count floats) and scalars (k doubles) become their sums over the ranks.
  // With a bf16 wire the result is rounded to bf16 (held in the floats). Returns the traffic,
  // with the bytes this rank sent as counted.
  LinkTraffic run(float* payload, size_t count, DType wire, double* scalars, size_t k);
  // The traffic of run() on this rank, computed without running it.
  LinkTraffic traffic(size_t count, DType wire, size_t k) const;

 private:
  Chunk chunk(size_t c, size_t count) const {
    return chunk_of(c, count, static_cast<size_t>(peers_->size()));
  }
  // Bytes of the message that carries chunk c (the scalars ride with chunk 0).
  size_t message_bytes(size_t c, size_t count, DType wire, size_t k) const;
  // Sends chunk `send` of the payload to the right neighbour and receives chunk `recv` from the
  // left one into `into` (and the scalars into incoming_scalars_ when it is chunk 0).
  void exchange(const float* payload, size_t count, DType wire, const double* scalars, size_t k,
                size_t send, size_t recv, float* into);
  // Tells the watchdog where the ring is: `phase` step s of the G - 1, and its neighbours.
  void watch_step(const char* phase, int s) const;

  PeerExchange* peers_;
  int64_t sent_ = 0;
  std::vector<std::byte> send_buffer_;
  std::vector<std::byte> recv_buffer_;
  std::vector<float> incoming_;
  std::vector<double> incoming_scalars_;
};

}  // namespace autoloco
