// What the inter-dc collectives (the ring, the compressed all-reduce, the sparse all-gather)
// need from a transport: point-to-point transfers among the G ranks of one group, all at once.
// One MPI job carries them over MPI (mpi_peer_exchange.hpp); the elastic mode, where each dc is
// its own job, over TCP among the stripe's members (tcp_peer_exchange.hpp). The collectives'
// arithmetic is the same on both, so a quorum of the same dcs computes the same bits.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace autoloco {

class PeerExchange {
 public:
  virtual ~PeerExchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  struct Send {
    int peer = 0;
    const void* data = nullptr;
    size_t bytes = 0;
  };
  struct Recv {
    int peer = 0;
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Starts every send and receive at once and returns when all completed. A receive takes
  // exactly `bytes` bytes; at most one send and one receive per peer. `tag` tells the exchanges
  // of different collectives apart.
  virtual void exchange(const std::vector<Send>& sends, const std::vector<Recv>& recvs,
                        int tag) = 0;
  // How a log names a peer ("world rank 5", "dc 3 member 1").
  virtual std::string peer_name(int peer) const = 0;
};

}  // namespace autoloco
