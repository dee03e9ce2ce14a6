// The inter-dc link. Every inter-dc all-reduce goes through a WanLink, which carries it
// over MPI (a ring for fp32 and bf16, the compressed all-to-all for the block formats) and
// charges its link time to a simulated clock: each phase of the collective (link_traffic.hpp)
// costs the latency plus the bytes of the dc's members in it over the dc's bandwidth B. For a
// ring of n bytes per dc over G dcs in even chunks that is ALGORITHMS.md §1's
//   T = 2 (G - 1) (latency + n / (G B)).
// The dc's members send their shards at the same time over the same link. In sleep mode the
// rank also waits T out; in real mode (dcs on real hosts) the model's T is only reported beside
// the measured seconds (wall_seconds).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "autoloco/comm/compressed_allreduce.hpp"
#include "autoloco/comm/link_traffic.hpp"
#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/mpi_peer_exchange.hpp"
#include "autoloco/comm/packed_message.hpp"
#include "autoloco/comm/peer_exchange.hpp"
#include "autoloco/comm/ring_allreduce.hpp"
#include "autoloco/comm/sparse_allgather.hpp"
#include "autoloco/comm/wire_format.hpp"

namespace autoloco {

// What a WanLink has counted so far (checkpoints keep it so a resumed run counts on).
struct WanCounters {
  int64_t dc_bytes = 0;
  int64_t sent_bytes = 0;  // all dcs
  int64_t messages = 0;
  double link_s = 0.0;
  double wall_s = 0.0;
};

struct WanModel {
  double bandwidth_gbps = 1.0;  // per dc, 1e9 bits/s
  double latency_ms = 50.0;
  bool sleep = false;
  int dcs = 1;
  int members = 1;  // ranks per dc sharing the link
  // wan.mode real: the run's clock takes the measured seconds of each all-reduce; the model's
  // are still counted (link_seconds) and reported beside them.
  bool measured = false;

  // Link seconds of one collective with this traffic on every member of a dc.
  double seconds(const LinkTraffic& traffic) const;
};

class WanLink {
 public:
  // `inter` connects this rank with the ranks of the other dcs that share its member index.
  WanLink(MpiCommunicator& inter, WanModel model);
  // The same over any transport (the elastic mode's stripe; it must outlive the link). The
  // number of dcs follows the group's size at each all-reduce.
  WanLink(PeerExchange& peers, WanModel model);

  // The all-reduce across dcs: the payload in the codec's format, the scalars as doubles in the
  // same messages (ring_allreduce.hpp, compressed_allreduce.hpp; a sparse codec's
  // contributions all-gathered instead, sparse_allgather.hpp); `stream` seeds stochastic
  // rounding; `residual` (block formats only) receives what rounding this rank's contribution
  // lost (compressed_allreduce.hpp). Counts one message of message_bytes(count, codec, k) per
  // member and the bytes sent, charges their link time, and in sleep mode waits for it.
  void allreduce(float* payload, size_t count, const WireCodec& codec, double* scalars, size_t k,
                 uint64_t stream = 0, float* residual = nullptr);
  // The traffic of that all-reduce on this rank, and its link seconds, without running it.
  LinkTraffic traffic(size_t count, const WireCodec& codec, size_t k) const;
  double seconds(size_t count, const WireCodec& codec, size_t k) const;
  // Bytes of the all-reduced message of `count` values and `k` scalars in the codec's format.
  static size_t message_bytes(size_t count, const WireCodec& codec, size_t k);

  // On the communication thread: patient waits, and a sleep that `policy.cancel` can cut short.
  void set_wait_policy(const WaitPolicy& policy);

  // The dcs in the group now (a stripe's changes with the quorum).
  int dcs() const { return peers_->size(); }
  const WanModel& model() const { return model_; }
  // Bytes the whole dc handed to the link so far (members x this rank's messages).
  // The counters are written by whichever thread runs allreduce and may be read by the main
  // thread meanwhile (logs), hence atomics; each has one writer at a time.
  int64_t dc_bytes() const { return dc_bytes_.load(); }
  // Bytes all dcs sent on the link so far (values, scales, scalars): what the link time was
  // charged for.
  int64_t sent_bytes() const { return sent_bytes_.load(); }
  // The last all-reduce's traffic on this rank, with the bytes it sent as counted (tests).
  LinkTraffic last_traffic() const { return last_; }
  // The model's link seconds so far.
  double link_seconds() const { return link_s_.load(); }
  // The link seconds the run's clock takes: in real mode the measured ones (wall_seconds).
  double clock_seconds() const { return model_.measured ? wall_seconds() : link_seconds(); }
  // Real seconds spent inside allreduce (the transfer, and the sleep in sleep mode). A
  // blocking sync subtracts them from wall-clock to get the compute time of the simulated clock;
  // in real mode they are the measured link time.
  double wall_seconds() const { return wall_s_.load(); }
  int64_t messages() const { return messages_.load(); }
  WanCounters counters() const {
    return {dc_bytes(), sent_bytes(), messages(), link_seconds(), wall_seconds()};
  }
  void restore(const WanCounters& c);

 private:
  std::unique_ptr<MpiPeerExchange> owned_;  // built from an MPI communicator
  PeerExchange* peers_;
  RingAllreduce ring_;
  CompressedAllreduce compressed_;
  SparseAllgather sparse_;
  WanModel model_;
  const std::atomic<bool>* cancel_ = nullptr;
  std::atomic<int64_t> dc_bytes_{0};
  std::atomic<int64_t> sent_bytes_{0};
  LinkTraffic last_;
  std::atomic<int64_t> messages_{0};
  std::atomic<double> link_s_{0.0};
  std::atomic<double> wall_s_{0.0};
};

}  // namespace autoloco
