// PeerExchange over TCP, for the elastic mode's stripes (docs/elastic.md): member m of each dc in
// the quorum, ranked by dc id, over one connection per pair (stripe_connections.hpp). Every
// message carries a header (the quorum, the collective's tag, its length), so a stray or stale
// message is refused instead of being summed. A wait ends when a peer closes (PeerLost), when no
// byte moved for `idle_timeout_s` (PeerTimeout: a peer frozen, or its link cut) or when the
// lighthouse calls the quorum off (WaitInterrupted, through `wake`), whichever comes first: a
// frozen peer holds the others no longer than the lighthouse's heartbeat timeout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/comm/peer_exchange.hpp"
#include "autoloco/comm/socket.hpp"

namespace autoloco {

class TcpPeerExchange : public PeerExchange {
 public:
  struct Peer {
    const Socket* socket = nullptr;  // null for this rank's own slot
    std::string name;                // "dc 3 member 1"
  };
  // `peers` has one entry per rank of the group (this rank's own slot unused).
  TcpPeerExchange(int rank, std::vector<Peer> peers, int64_t quorum, double idle_timeout_s,
                  const Wakeup* wake);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }
  void exchange(const std::vector<Send>& sends, const std::vector<Recv>& recvs, int tag) override;
  std::string peer_name(int peer) const override { return peers_[static_cast<size_t>(peer)].name; }

  int64_t quorum() const { return quorum_; }
  // Bytes sent and received so far (headers included).
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

  static constexpr size_t kHeaderBytes = 24;

 private:
  int rank_;
  std::vector<Peer> peers_;
  int64_t quorum_;
  double idle_timeout_s_;
  const Wakeup* wake_;
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace autoloco
