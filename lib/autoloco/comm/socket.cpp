#include "autoloco/comm/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "autoloco/util/sha256.hpp"

namespace autoloco {
namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw CommError("fcntl(O_NONBLOCK): " + errno_text(errno));
  }
}

int millis_until(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000 * 1000 ? 1000 * 1000 : static_cast<int>(left);
}

// Waits until `fd` is ready for `events`, the deadline passes (PeerTimeout) or `wake` is
// signalled (WaitInterrupted).
void wait_for(int fd, short events, Deadline deadline, const Wakeup* wake, std::string_view what,
              std::string_view doing) {
  while (true) {
    pollfd fds[2] = {{fd, events, 0}, {wake ? wake->fd() : -1, POLLIN, 0}};
    const int n = ::poll(fds, wake ? 2 : 1, millis_until(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw CommError(fmt::format("poll while {} {}: {}", doing, what, errno_text(errno)));
    }
    if (wake && (fds[1].revents & POLLIN)) {
      throw WaitInterrupted(fmt::format("{} {}: called off", doing, what));
    }
    if (fds[0].revents != 0) return;  // ready, or an error the next call reports
    if (Clock::now() >= deadline) {
      throw PeerTimeout(fmt::format("{} {}: no progress before the deadline", doing, what));
    }
  }
}

sockaddr_in resolve(const Endpoint& e) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(e.host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw PeerLost(fmt::format("cannot resolve {}: {}", e.str(), ::gai_strerror(rc)));
  }
  sockaddr_in addr{};
  std::memcpy(&addr, found->ai_addr, sizeof(addr));
  ::freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(e.port));
  return addr;
}

}  // namespace

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Endpoint::str() const {
  return fmt::format("{}:{}", host, port);
}

Endpoint Endpoint::parse(std::string_view s, std::string_view what) {
  const size_t colon = s.rfind(':');
  Endpoint e;
  int port = -1;
  if (colon != std::string_view::npos && colon > 0) {
    const std::string_view p = s.substr(colon + 1);
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size()) port = -1;
  }
  if (port < 0 || port > 65535) {
    throw ConfigError(
        fmt::format("{}: expected HOST:PORT (e.g. 10.0.0.5:29400), got '{}'", what, s));
  }
  e.host = std::string(s.substr(0, colon));
  e.port = port;
  return e;
}

Deadline deadline_in(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds < 0 ? 0 : seconds));
}

Wakeup::Wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!fd_.valid()) throw CommError("eventfd: " + errno_text(errno));
}

void Wakeup::signal() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(fd_.fd(), &one, sizeof(one));
}

void Wakeup::clear() {
  uint64_t value = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd_.fd(), &value, sizeof(value));
}

Socket listen_tcp(const Endpoint& at, int backlog) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw CommError("socket: " + errno_text(errno));
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(at.port));
  if (at.host.empty() || at.host == "0.0.0.0") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  } else {
    addr = resolve(at);
  }
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw CommError(
        fmt::format("cannot listen on {}: {} (another process on that port? pick "
                    "another)",
                    at.str(), errno_text(errno)));
  }
  if (::listen(s.fd(), backlog) != 0) {
    throw CommError(fmt::format("listen on {}: {}", at.str(), errno_text(errno)));
  }
  set_nonblocking(s.fd());
  return s;
}

int local_port(const Socket& s) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return ntohs(addr.sin_port);
}

Socket accept_tcp(const Socket& listener) {
  while (true) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return Socket(fd);
    }
    if (errno == EINTR) continue;
    // EAGAIN: none pending; ECONNABORTED and the like: that one is gone, try again later.
    return Socket();
  }
}

Socket connect_tcp(const Endpoint& to, Deadline deadline, const Wakeup* wake) {
  const sockaddr_in addr = resolve(to);
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) throw CommError("socket: " + errno_text(errno));
  const int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      throw PeerLost(fmt::format("cannot connect to {}: {}", to.str(), errno_text(errno)));
    }
    wait_for(s.fd(), POLLOUT, deadline, wake, to.str(), "connecting to");
    int error = 0;
    socklen_t len = sizeof(error);
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      throw PeerLost(fmt::format("cannot connect to {}: {}", to.str(), errno_text(error)));
    }
  }
  return s;
}

namespace {

std::string host_of(const sockaddr_in& addr) {
  char host[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
  return host;
}

}  // namespace

std::string peer_address(const Socket& s) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return fmt::format("{}:{}", host_of(addr), ntohs(addr.sin_port));
}

std::string local_host(const Socket& s) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "127.0.0.1";
  return host_of(addr);
}

void write_all(const Socket& s, const void* data, size_t bytes, Deadline deadline,
               const Wakeup* wake, std::string_view what) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(s.fd(), p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_for(s.fd(), POLLOUT, deadline, wake, what, "sending to");
      continue;
    }
    throw PeerLost(fmt::format("sending to {}: {}", what, errno_text(errno)));
  }
}

void read_exact(const Socket& s, void* data, size_t bytes, Deadline deadline, const Wakeup* wake,
                std::string_view what) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(s.fd(), p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw PeerLost(fmt::format("{} closed the connection", what));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for(s.fd(), POLLIN, deadline, wake, what, "receiving from");
      continue;
    }
    throw PeerLost(fmt::format("receiving from {}: {}", what, errno_text(errno)));
  }
}

void write_frame(const Socket& s, std::string_view payload, Deadline deadline, const Wakeup* wake,
                 std::string_view what) {
  const auto n = static_cast<uint32_t>(payload.size());
  const unsigned char header[4] = {
      static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
      static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
  std::string frame(reinterpret_cast<const char*>(header), 4);
  frame.append(payload);
  write_all(s, frame.data(), frame.size(), deadline, wake, what);
}

std::string read_frame(const Socket& s, size_t max_bytes, Deadline deadline, const Wakeup* wake,
                       std::string_view what) {
  unsigned char header[4];
  read_exact(s, header, 4, deadline, wake, what);
  const uint32_t n = uint32_t{header[0]} | (uint32_t{header[1]} << 8) |
                     (uint32_t{header[2]} << 16) | (uint32_t{header[3]} << 24);
  if (n > max_bytes) {
    throw PeerLost(fmt::format("{} sent a frame of {} bytes (at most {})", what, n, max_bytes));
  }
  std::string payload(n, '\0');
  read_exact(s, payload.data(), n, deadline, wake, what);
  return payload;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("getrandom: " + errno_text(errno));
    }
    got += static_cast<size_t>(n);
  }
  return to_hex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
}

uint64_t random_u64() {
  uint64_t v = 0;
  while (::getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
  }
  return v;
}

}  // namespace autoloco
