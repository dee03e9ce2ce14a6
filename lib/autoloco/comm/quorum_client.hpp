// A dc process's side of the lighthouse (docs/elastic.md): every member keeps one authenticated
// connection, on a thread of its own that heartbeats, reconnects when the lighthouse restarts,
// and wakes the stripe's waits (wake()) when the lighthouse calls a quorum off, so that a
// frozen peer holds the survivors no longer than the heartbeat timeout. Member 0 speaks for its
// dc (ready, result, state); every member hears abort. The training thread sends through
// send() and takes the lighthouse's decisions with next().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "autoloco/comm/control_message.hpp"
#include "autoloco/comm/handshake.hpp"
#include "autoloco/comm/socket.hpp"

namespace autoloco {

struct QuorumClientOptions {
  Endpoint lighthouse;
  std::string key;
  int dc = 0;
  int member = 0;
  int members = 1;
  std::string incarnation;  // the same on every member of this launch
  // Where this member's stripe listens, as the others dial it: the host (empty: this host's
  // address on its route to the lighthouse) and the port.
  std::string advertise;
  int port = 0;
  // run.* fields: what every dc of the run must agree on (the lighthouse refuses a dc that
  // differs, naming the field).
  std::vector<std::pair<std::string, std::string>> identity;
  double heartbeat_s = 0.5;
  // How long to keep trying to reach the lighthouse (at the start and after losing it).
  double reconnect_s = 600.0;
};

class QuorumClient {
 public:
  using Log = std::function<void(const std::string&)>;
  // Connects (retrying until options.reconnect_s) and says hello with `committed` and `hash`.
  QuorumClient(QuorumClientOptions options, int64_t committed, std::string hash, Log log);
  ~QuorumClient();
  QuorumClient(const QuorumClient&) = delete;
  QuorumClient& operator=(const QuorumClient&) = delete;

  // The state a hello reports after a reconnect (member 0 keeps it current).
  void set_state(int64_t committed, const std::string& hash);
  // Queues a message for the lighthouse.
  void send(const ControlMessage& m);
  // Waits until every queued message went out (or the deadline passed, or the client failed):
  // before the last words of a dc that ends.
  void flush(Deadline deadline);
  // Member 0: the next decision (status, quorum, heal, commit, abort) in the order it came, until
  // `deadline`. A "lost" message stands for a lost lighthouse (the decision in flight is gone),
  // also when the lighthouse dropped this dc and it joins again. CommError when the lighthouse
  // refused this dc (naming its reason), PeerTimeout at the deadline.
  ControlMessage next(Deadline deadline);
  // Signalled when the lighthouse calls off a quorum (or is lost): stripe waits watch it.
  const Wakeup& wake() const { return wake_; }
  // Clears the wake-up for a new quorum; returns the highest quorum id called off so far.
  int64_t rearm();
  // The address of this host on the route to the lighthouse (elastic.advertise's default).
  std::string local_address() const { return local_address_; }

 private:
  // Connects and says hello until `deadline`; false if the lighthouse cannot be reached.
  bool connect_and_hello(Deadline deadline);
  void loop();
  void reconnect();
  void deliver(ControlMessage m);
  void fail(const std::string& why);

  QuorumClientOptions options_;
  Log log_;
  Socket socket_;  // the client thread's, once it runs
  Session session_;
  std::string local_address_;
  Wakeup wake_;
  Wakeup outbox_ready_;
  Wakeup stop_;
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<ControlMessage> inbox_;
  std::deque<ControlMessage> outbox_;
  int64_t queued_ = 0;  // messages put in the outbox, and sent from it
  int64_t sent_ = 0;
  int64_t committed_ = 0;
  std::string hash_;
  int64_t aborted_ = 0;
  std::string fatal_;
};

}  // namespace autoloco
