// TCP for the elastic mode (the lighthouse's connections and the stripes between dcs): sockets
// that close themselves, endpoints, and reads and writes that end at a deadline or when another
// thread wakes them, so that no wait on a peer can outlast the budget the caller gave it (a
// frozen peer never holds a survivor longer than its timeouts: docs/elastic.md, timeouts).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "autoloco/util/error.hpp"

namespace autoloco {

// The peer closed the connection, reset it or could not be reached.
class PeerLost : public CommError {
 public:
  using CommError::CommError;
};
// A wait on a peer passed its deadline.
class PeerTimeout : public CommError {
 public:
  using CommError::CommError;
};
// Another thread woke the wait (Wakeup::signal): the lighthouse called the collective off.
class WaitInterrupted : public CommError {
 public:
  using CommError::CommError;
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

// host:port; the host is an IPv4 address or a name (resolved at connect time).
struct Endpoint {
  std::string host;
  int port = 0;
  std::string str() const;
  // "HOST:PORT"; `what` names the setting in the error (e.g. "elastic.lighthouse").
  static Endpoint parse(std::string_view s, std::string_view what);
};

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
Deadline deadline_in(double seconds);

// An eventfd that any thread can signal to wake the waits that watch it.
class Wakeup {
 public:
  Wakeup();
  void signal();
  void clear();
  int fd() const { return fd_.fd(); }

 private:
  Socket fd_;
};

// A listening socket (non-blocking, SO_REUSEADDR) on host:port; port 0 picks a free one.
Socket listen_tcp(const Endpoint& at, int backlog = 64);
int local_port(const Socket& s);
// The next pending connection (non-blocking), or an invalid Socket when there is none.
Socket accept_tcp(const Socket& listener);
// A connected non-blocking socket with TCP_NODELAY; PeerLost naming the endpoint if it cannot be
// reached by the deadline.
Socket connect_tcp(const Endpoint& to, Deadline deadline, const Wakeup* wake = nullptr);
// "ADDRESS:PORT" of the other end (for logs).
std::string peer_address(const Socket& s);
// The address of this end ("10.0.0.3"): what the host's route to the peer goes out from.
std::string local_host(const Socket& s);

// Blocking over a non-blocking socket: everything, or PeerLost / PeerTimeout / WaitInterrupted.
// `what` names the peer in the error.
void write_all(const Socket& s, const void* data, size_t bytes, Deadline deadline,
               const Wakeup* wake, std::string_view what);
void read_exact(const Socket& s, void* data, size_t bytes, Deadline deadline, const Wakeup* wake,
                std::string_view what);

// Frames: a 4-byte little-endian length, then that many bytes (at most `max_bytes`).
void write_frame(const Socket& s, std::string_view payload, Deadline deadline, const Wakeup* wake,
                 std::string_view what);
std::string read_frame(const Socket& s, size_t max_bytes, Deadline deadline, const Wakeup* wake,
                       std::string_view what);

// Random bytes from the kernel, as lower-case hex (nonces, keys, incarnations).
std::string random_hex(size_t bytes);
uint64_t random_u64();

}  // namespace autoloco
