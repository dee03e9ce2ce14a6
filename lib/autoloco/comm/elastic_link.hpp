// A dc's side of the elastic mode (docs/elastic.md), for the Trainer: each member's lighthouse
// client and stripe connections, and the dc-wide steps of a round around them. Member 0 speaks
// for the dc; every decision reaches the other members by MPI_Bcast inside the dc, so all
// members of a dc act on the same one, and a dc's outcome is the minimum over its members.
//
//   start()     train, or wait to be healed
//   boundary()  ready(round, tokens) -> this dc's quorum, its stripe connected (sync), or heal
//   conclude()  every member's outcome -> result -> commit or abort (the same on every member)
//   serve_heals() / receive_heal()   a committed dc's state to the joiners, stripe by stripe
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/comm/control_message.hpp"
#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/peer_exchange.hpp"
#include "autoloco/comm/quorum_client.hpp"
#include "autoloco/comm/socket.hpp"
#include "autoloco/comm/stripe_connections.hpp"
#include "autoloco/comm/tcp_peer_exchange.hpp"

namespace autoloco {

struct ElasticSettings {
  Endpoint lighthouse;
  std::string key;
  int dc = -1;   // -1: not the elastic mode
  int port = 0;  // member m listens on port + m (0: any)
  std::string advertise;
  double heartbeat_s = 0.5;
  double heartbeat_timeout_s = 3.0;
  double collective_timeout_s = 60.0;
  double quorum_timeout_s = 600.0;
  // run.* fields every dc of the run must share.
  std::vector<std::pair<std::string, std::string>> identity;
};

struct ElasticDecision {
  // train: carry on; sync: this dc is in the quorum; heal: install a source's state; serve:
  // send this dc's committed state to joiners, then wait at the boundary again.
  enum class Kind { train, sync, heal, serve };
  Kind kind = Kind::train;
  int64_t quorum = 0;
  int64_t round = 0;
  std::vector<int> members;                        // the quorum's dcs, ascending
  std::vector<std::pair<int, int>> heals;          // (joiner, source)
  std::map<int, std::vector<Endpoint>> endpoints;  // a dc's members, by member index
  int source = -1;                                 // heal: the dc this one heals from
  std::string reason;
  bool connected = false;  // sync: this member's stripe connections are up

  // The joiners this dc is the source of.
  std::vector<int> joiners_of(int dc) const;
};

class ElasticLink {
 public:
  using Log = std::function<void(const std::string&)>;
  // Every member of the dc together: listens for the stripe (before any state exists, so that
  // the WanLink can be built over stripe()).
  ElasticLink(ElasticSettings settings, MpiCommunicator& intra, Log log);
  ~ElasticLink();

  // This member's stripe of the current quorum (a group of this dc alone before the first).
  PeerExchange& stripe();

  // Every member together, once the dc's state is loaded: connects to the lighthouse with it
  // (committed rounds and state hash) and takes the start decision: train, or heal.
  ElasticDecision start(int64_t committed, const std::string& hash);
  // After a failed heal (every member together): asks again, and waits for the next
  // assignment.
  ElasticDecision heal_again();
  ElasticDecision boundary(int64_t round, double tokens);
  // Whether the quorum committed: true on every member, or false on every member.
  bool conclude(const ElasticDecision& d, bool ok, const std::string& why);
  // A serve decision (or a commit with heals): this dc's committed state (the same bytes on
  // every member) to its joiners, each member sending its slice to the joiner's same member.
  void serve_heals(const ElasticDecision& d, const std::string& state);
  // A joiner: the state from its source, whole on every member (every member together).
  // CommError when the transfer failed on any member: then the dc asks to be healed again.
  std::string receive_heal(const ElasticDecision& d);
  // Member 0 reports the committed state; every member keeps it for a reconnect's hello.
  void report_state(int64_t committed, const std::string& hash);
  // Member 0 tells the lighthouse that this dc finished the run at round `round`, so that a dc
  // joining later is not left to carry the run on alone from an older state.
  void finish(int64_t round);

  const ElasticSettings& settings() const { return settings_; }
  int member() const { return member_; }
  // start()'s rendezvous: the seconds until every member had reached the lighthouse and been let
  // in, before it waited for its first decision (a join's time, split: docs/faults.md).
  double rendezvous_s() const { return rendezvous_s_; }

 private:
  class Stripe;
  ElasticDecision await_decision(int64_t round, bool joining);
  ElasticDecision broadcast(ElasticDecision d);
  void connect_stripe(ElasticDecision& d);
  bool all_members(bool ok);

  ElasticSettings settings_;
  MpiCommunicator& intra_;
  int member_;
  int members_;
  Log log_;
  std::string incarnation_;
  std::unique_ptr<StripeConnections> connections_;
  std::unique_ptr<QuorumClient> client_;
  std::vector<Socket> sockets_;
  std::unique_ptr<TcpPeerExchange> exchange_;
  std::unique_ptr<Stripe> stripe_;
  double rendezvous_s_ = 0.0;
};

// ControlMessage <-> decision (what member 0 broadcasts in its dc).
ControlMessage encode_decision(const ElasticDecision& d);
ElasticDecision decode_decision(const ControlMessage& m);

}  // namespace autoloco
