// Who may talk to a lighthouse or a stripe (docs/elastic.md, the key): every connection starts
// with a challenge and response over the shared key (HMAC-SHA256 of both sides' fresh nonces),
// in both directions, so neither side learns the key and a recorded handshake cannot be
// replayed; every later control frame carries a MAC under a per-connection session key with a
// sequence number, so a process without the key can neither join nor inject into a session.
// The key does not encrypt: the traffic between sites belongs in a private network or tunnel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "autoloco/comm/control_message.hpp"
#include "autoloco/comm/socket.hpp"

namespace autoloco {

// A peer that does not hold the key (or replays or alters frames).
class AuthError : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

// The shared key of a file (elastic.key_file, autoloco-lighthouse --key-file): its bytes
// without trailing whitespace, at least 16 of them; a file that others than its owner may read is
// refused (chmod 600), as ssh refuses such a private key. `what` names the setting.
std::string load_shared_key(const std::string& path, std::string_view what);
// Writes a new random key (32 bytes, hex) to a file that must not exist yet, mode 0600.
void write_new_key(const std::string& path);

// One side of an authenticated connection.
struct Session {
  std::string key;  // the session key
  uint64_t sent = 0;
  uint64_t received = 0;
  char send_direction = 'c';  // 'c': client to server, 's': server to client
};

// The server's side, a step at a time (the lighthouse never blocks on one client).
class ServerHandshake {
 public:
  explicit ServerHandshake(std::string key);
  // The first frame: "challenge" with the server's nonce.
  ControlMessage challenge() const;
  // Checks the client's "hello" (its mac over the challenge's nonce and its fields); returns the
  // "welcome" to send back and fills `session`. AuthError when the mac is wrong.
  ControlMessage accept(const ControlMessage& hello, Session& session) const;

 private:
  std::string key_;
  std::string nonce_;
};

// The client's side, blocking until `deadline`: reads the challenge, sends `hello` (its
// fields; nonce and mac are added), checks the welcome's mac. Returns the welcome and fills
// `session`. AuthError when the server does not hold the key or refuses this client.
ControlMessage client_handshake(const Socket& s, const std::string& key, ControlMessage hello,
                                Session& session, Deadline deadline, const Wakeup* wake,
                                std::string_view what);

// A control frame's payload with its MAC (sealed), and back (opened: AuthError if the MAC or
// the sequence does not match).
std::string seal(Session& session, std::string_view payload);
std::string open_sealed(Session& session, std::string_view sealed);

// Sealed control messages over a blocking socket.
void send_message(const Socket& s, Session& session, const ControlMessage& m, Deadline deadline,
                  const Wakeup* wake, std::string_view what);
ControlMessage receive_message(const Socket& s, Session& session, Deadline deadline,
                               const Wakeup* wake, std::string_view what);

}  // namespace autoloco
