// Member m's connections to member m of the other dcs (the stripe; docs/elastic.md): it listens
// on its endpoint (elastic.listen, advertised to the lighthouse), a thread of its own accepts and
// checks the key of every connection, and each quorum's connections are made afresh: between two
// dcs the one with the higher id dials, the other takes what its listener accepted. A joiner
// dials its heal source the same way. Connections are tagged with their quorum, so a slow one of
// a quorum called off is never mistaken for the next quorum's.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "autoloco/comm/socket.hpp"

namespace autoloco {

class StripeConnections {
 public:
  struct Identity {
    int dc = 0;
    int member = 0;
    std::string incarnation;
    std::string key;  // the shared key (elastic.key_file)
  };
  // Listens on `listen_at` (port 0: any free one) at once.
  StripeConnections(Identity me, const Endpoint& listen_at, double handshake_timeout_s = 5.0);
  ~StripeConnections();
  StripeConnections(const StripeConnections&) = delete;
  StripeConnections& operator=(const StripeConnections&) = delete;

  int port() const { return port_; }

  // A connection to dc `dc`'s member (this member's index) at `at`, for `quorum` and `purpose`
  // ("stripe" or "heal"). PeerLost / PeerTimeout / WaitInterrupted / AuthError as it fails.
  Socket dial(int64_t quorum, const std::string& purpose, int dc, const Endpoint& at,
              Deadline deadline, const Wakeup* wake);
  // The connection dc `dc` dialled for `quorum` and `purpose`, once the listener has it.
  Socket take(int64_t quorum, const std::string& purpose, int dc, Deadline deadline,
              const Wakeup* wake);
  // Every connection of this member's stripe for `quorum`: `dcs` (ascending, this dc among
  // them) and their members' endpoints at this member's index. Indexed like `dcs`; this dc's
  // own slot stays empty.
  std::vector<Socket> connect_group(int64_t quorum, const std::vector<int>& dcs,
                                    const std::vector<Endpoint>& endpoints, Deadline deadline,
                                    const Wakeup* wake);
  // Drops connections that nobody took, of quorums before `quorum`.
  void forget_before(int64_t quorum);
  // What the listener refused (a wrong key, another member's index), for logs and tests.
  int64_t refused() const;

 private:
  void accept_loop();
  void admit(Socket s);

  Identity me_;
  double handshake_timeout_s_;
  Socket listener_;
  int port_ = 0;
  Wakeup stop_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::tuple<int64_t, std::string, int>, Socket> waiting_;
  int64_t refused_ = 0;
  bool stopping_ = false;
};

}  // namespace autoloco
