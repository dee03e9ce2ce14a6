// The lighthouse's decisions (docs/elastic.md): which dcs are live, which take part in each
// round (the quorum), whether a round is committed by all of its quorum or by none, and who
// heals whom. Pure: messages in, messages out, time passed in, so every rule is tested without
// sockets or clocks (tests/elastic/test_quorum_rules.cpp); quorum_rules.cpp has the members,
// quorum_rounds.cpp the rounds. The lighthouse's server (lighthouse_server.hpp) feeds it what its
// connections receive and sends what it returns.
//
// It keeps nothing that the dcs cannot tell a restarted lighthouse again: each dc's hello
// carries its committed round and state hash, and a dc that loses the lighthouse in the
// middle of a round redoes the round with the next one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "autoloco/comm/control_message.hpp"

namespace autoloco {

using ConnId = int64_t;

struct QuorumSettings {
  int min_dcs = 1;
  // A round waits this long after its first dc reached the boundary for the others; then the
  // dcs that are there sync without the rest.
  double round_deadline_s = 60.0;
  // A member not heard from for this long is taken for dead, and its dc with it.
  double heartbeat_timeout_s = 5.0;
  // A quorum whose members have not all reported their all-reduce by then is called off.
  double result_timeout_s = 120.0;
  // The first quorum id. The lighthouse server starts above every id of its previous starts
  // (lighthouse_server.cpp), so that a restarted lighthouse's ids never match a stripe's
  // connections or call-offs of the previous one.
  int64_t first_quorum_id = 1;
};

// A message for one connection; `close` drops the connection once it is sent.
struct Outgoing {
  ConnId to = -1;
  ControlMessage message;
  bool close = false;
};

class QuorumRules {
 public:
  using Log = std::function<void(const std::string&)>;
  QuorumRules(QuorumSettings settings, Log log);

  // A client that proved the key sent its hello (fields: dc, member, members, incarnation,
  // endpoint; member 0 also committed and hash; run.* the run's identity). A hello that cannot
  // join is answered by a "refused" that closes the connection.
  std::vector<Outgoing> on_hello(ConnId conn, const ControlMessage& hello, double now);
  // Any later message of that client (heartbeat, ready, join, result, state, finished).
  std::vector<Outgoing> on_message(ConnId conn, const ControlMessage& m, double now);
  // Its connection closed (or the server dropped it).
  std::vector<Outgoing> on_closed(ConnId conn, double now);
  // Time passed: heartbeats that stopped, deadlines that passed.
  std::vector<Outgoing> tick(double now);

  // The newest committed round among the live dcs.
  int64_t committed_round() const { return committed_; }
  // The dcs with every member connected.
  std::vector<int> live_dcs() const;
  std::optional<int64_t> quorum_in_flight() const;
  int64_t next_quorum_id() const { return next_id_; }

 private:
  struct Member {
    ConnId conn = -1;
    double last_heard = 0.0;
    std::string endpoint;
  };
  enum class Phase {
    kConnecting,  // not every member has said hello
    kTraining,    // up to date, in its round's inner steps
    kReady,       // at the boundary of round committed_ + 1
    kSyncing,     // in the quorum in flight
    kJoining,     // waits to be healed at the next boundary
    kHealing,     // assigned a source in the quorum in flight
  };
  struct Dc {
    int id = 0;
    std::string incarnation;
    int members = 0;
    std::vector<Member> member;
    int64_t committed = 0;
    std::string hash;
    Phase phase = Phase::kConnecting;
  };
  struct InFlight {
    int64_t id = 0;
    int64_t round = 0;
    std::vector<int> members;
    std::vector<std::pair<int, int>> heals;  // (joiner, source)
    std::set<int> reported;
    double issued_at = 0.0;
  };

  std::vector<Outgoing> out_;
  void send(const Dc& dc, int member, ControlMessage m, bool close = false);
  void send_all_members(const Dc& dc, const ControlMessage& m);
  void refuse(ConnId conn, const std::string& reason, bool retry = false);

  Dc* find_by_conn(ConnId conn, int* member);
  bool complete(const Dc& dc) const;
  void on_complete(Dc& dc, double now);
  void drop_dc(int id, const std::string& reason, double now);
  void abort_in_flight(const std::string& reason);
  void commit_in_flight();
  void try_issue(double now);
  // Heals `joiners` from the dcs waiting at the boundary (`sources`), round-robin: "serve" to
  // each source's member 0, "heal" to each joiner's.
  void serve_joiners(const std::vector<int>& sources, const std::vector<int>& joiners);
  void on_ready(Dc& dc, const ControlMessage& m, double now);
  void on_result(Dc& dc, const ControlMessage& m);
  void on_state(Dc& dc, const ControlMessage& m);
  void mark_joining(Dc& dc, const std::string& why);
  std::string check_identity(const ControlMessage& hello) const;
  // The first dc's run.* fields become the run's identity, and its elastic settings the rules'.
  void adopt_identity(const ControlMessage& hello);
  // The state hash that most dcs reported for `round` (ties: the lowest dc's), if any did.
  std::optional<std::string> canonical_hash(int64_t round) const;
  void add_endpoints(ControlMessage& m, const std::vector<int>& dcs) const;
  std::vector<Outgoing> take();

  QuorumSettings settings_;
  Log log_;
  std::map<int, Dc> dcs_;
  std::map<std::string, std::string> identity_;  // run.* of the first dc
  int64_t committed_ = 0;
  // The round at which a dc finished the run (run.steps), 0 while none has: a dc behind it that
  // nobody is left to heal is refused rather than let carry on from its own older state (a fork
  // of the run under the same name).
  int64_t finished_ = 0;
  bool behind_finished_run(const Dc& dc);
  std::optional<double> first_ready_at_;
  std::optional<InFlight> in_flight_;
  int64_t next_id_ = 1;
  // Hashes the dcs reported per committed round (the last few rounds).
  std::map<int64_t, std::map<int, std::string>> reported_hashes_;
  double last_wait_log_ = -1e9;
};

}  // namespace autoloco
