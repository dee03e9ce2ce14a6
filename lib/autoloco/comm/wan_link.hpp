// The simulated inter-dc link. Every inter-dc all-reduce goes through a WanLink, which carries it
// over MPI and charges the link time of ALGORITHMS.md §1 to a simulated clock:
//   T = 2 (G - 1) (latency + n / (G B))
// for a ring all-reduce of n bytes per dc over G dcs, where B is the dc's bandwidth. The dc's
// members send their shards at the same time over the same link, so n is the sum of their
// messages (members x message bytes). In sleep mode the rank also waits T out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/packed_message.hpp"
#include "autoloco/comm/ring_allreduce.hpp"

namespace autoloco {

// What a WanLink has counted so far (checkpoints keep it so a resumed run counts on).
struct WanCounters {
  int64_t dc_bytes = 0;
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

  // Link seconds of one all-reduce in which every member sends `bytes_per_member` bytes.
  double seconds(size_t bytes_per_member) const;
};

class WanLink {
 public:
  // `inter` connects this rank with the ranks of the other dcs that share its member index.
  WanLink(MpiCommunicator& inter, WanModel model);

  // The all-reduce across dcs (payload in `wire`, scalars as doubles in the same messages; see
  // ring_allreduce.hpp), accounted as one message of PackedLayout{count, wire, k}.bytes() per
  // member, and in sleep mode waited for.
  void allreduce(float* payload, size_t count, DType wire, double* scalars, size_t k);

  // On the communication thread: patient waits, and a sleep that `policy.cancel` can cut short.
  void set_wait_policy(const WaitPolicy& policy);

  int dcs() const { return model_.dcs; }
  const WanModel& model() const { return model_; }
  // Bytes the whole dc handed to the link so far (members x this rank's messages).
  // The counters are written by whichever thread runs allreduce and may be read by the main
  // thread meanwhile (logs), hence atomics; each has one writer at a time.
  int64_t dc_bytes() const { return dc_bytes_.load(); }
  // Simulated link seconds so far.
  double link_seconds() const { return link_s_.load(); }
  // Real seconds spent inside allreduce (the transfer, and the sleep in sleep mode). A
  // blocking sync subtracts them from wall-clock to get the compute time of the simulated clock.
  double wall_seconds() const { return wall_s_.load(); }
  int64_t messages() const { return messages_.load(); }
  WanCounters counters() const { return {dc_bytes(), messages(), link_seconds(), wall_seconds()}; }
  void restore(const WanCounters& c);

 private:
  RingAllreduce ring_;
  WanModel model_;
  const std::atomic<bool>* cancel_ = nullptr;
  std::atomic<int64_t> dc_bytes_{0};
  std::atomic<int64_t> messages_{0};
  std::atomic<double> link_s_{0.0};
  std::atomic<double> wall_s_{0.0};
};

}  // namespace autoloco
