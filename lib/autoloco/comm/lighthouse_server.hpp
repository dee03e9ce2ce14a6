// autoloco-lighthouse's server: one thread, one poll loop over its listening socket and its
// clients (every member of every dc), so that no client, however slow or frozen, can hold it:
// it never blocks on a socket (writes are queued and flushed when the socket takes them). A
// client first proves the key (handshake.hpp), then its messages go to QuorumRules, whose
// answers it sends; a client that breaks the protocol is dropped and named in the log.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autoloco/comm/quorum_rules.hpp"
#include "autoloco/comm/socket.hpp"

namespace autoloco {

struct LighthouseOptions {
  Endpoint listen{"0.0.0.0", 29400};
  std::string key;  // the shared key's bytes
  // Used until the first dc's hello brings the run's own (elastic.*).
  QuorumSettings settings;
  double tick_s = 0.05;
  double handshake_timeout_s = 10.0;
  int max_clients = 4096;
};

class LighthouseServer {
 public:
  using Log = std::function<void(const std::string&)>;
  LighthouseServer(LighthouseOptions options, Log log);
  ~LighthouseServer();
  LighthouseServer(const LighthouseServer&) = delete;
  LighthouseServer& operator=(const LighthouseServer&) = delete;

  // The port it listens on (the chosen one when options.listen.port is 0).
  int port() const { return port_; }
  // Serves until stop() (from another thread or a signal handler's flag).
  void run(const std::atomic<bool>& stop);

 private:
  struct Client;
  void accept_clients(double now);
  void read_from(Client& c, double now);
  void handle_frame(Client& c, const std::string& frame, double now);
  void deliver(std::vector<Outgoing> out);
  void queue_plain(Client& c, const ControlMessage& m);
  void queue_sealed(Client& c, const ControlMessage& m);
  void drop(Client& c, const std::string& why, double now);
  double now() const;

  LighthouseOptions options_;
  Log log_;
  Socket listener_;
  int port_ = 0;
  QuorumRules rules_;
  std::vector<std::unique_ptr<Client>> clients_;
  ConnId next_conn_ = 1;
  Clock::time_point start_;
};

}  // namespace autoloco
