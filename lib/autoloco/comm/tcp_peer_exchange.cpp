#include "autoloco/comm/tcp_peer_exchange.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>

#include "autoloco/comm/control_message.hpp"

namespace autoloco {
namespace {

constexpr uint32_t kMagic = 0x414c5831;  // "ALX1"

void put(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t{p[i]} << (8 * i);
  return v;
}

struct Outgoing {
  int fd = -1;
  int peer = 0;
  unsigned char header[TcpPeerExchange::kHeaderBytes] = {};
  const char* data = nullptr;
  size_t bytes = 0;
  size_t done = 0;  // of header + data
  size_t total() const { return TcpPeerExchange::kHeaderBytes + bytes; }
};

struct Incoming {
  int fd = -1;
  int peer = 0;
  unsigned char header[TcpPeerExchange::kHeaderBytes] = {};
  char* data = nullptr;
  size_t bytes = 0;
  size_t done = 0;
  size_t total() const { return TcpPeerExchange::kHeaderBytes + bytes; }
};

}  // namespace

TcpPeerExchange::TcpPeerExchange(int rank, std::vector<Peer> peers, int64_t quorum,
                                 double idle_timeout_s, const Wakeup* wake)
    : rank_(rank),
      peers_(std::move(peers)),
      quorum_(quorum),
      idle_timeout_s_(idle_timeout_s),
      wake_(wake) {}

void TcpPeerExchange::exchange(const std::vector<Send>& sends, const std::vector<Recv>& recvs,
                               int tag) {
  std::vector<Outgoing> out(sends.size());
  std::vector<Incoming> in(recvs.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    const Send& s = sends[i];
    Outgoing& o = out[i];
    o.fd = peers_[static_cast<size_t>(s.peer)].socket->fd();
    o.peer = s.peer;
    o.data = static_cast<const char*>(s.data);
    o.bytes = s.bytes;
    put(o.header, kMagic, 4);
    put(o.header + 4, static_cast<uint32_t>(tag), 4);
    put(o.header + 8, static_cast<uint64_t>(quorum_), 8);
    put(o.header + 16, s.bytes, 8);
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    in[i].fd = peers_[static_cast<size_t>(recvs[i].peer)].socket->fd();
    in[i].peer = recvs[i].peer;
    in[i].data = static_cast<char*>(recvs[i].data);
    in[i].bytes = recvs[i].bytes;
  }
  Deadline idle_until = deadline_in(idle_timeout_s_);
  std::vector<pollfd> fds;
  std::vector<std::pair<bool, size_t>> owner;  // (is a send, index) per pollfd
  while (true) {
    fds.clear();
    owner.clear();
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].done < out[i].total()) {
        fds.push_back({out[i].fd, POLLOUT, 0});
        owner.emplace_back(true, i);
      }
    }
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].done < in[i].total()) {
        fds.push_back({in[i].fd, POLLIN, 0});
        owner.emplace_back(false, i);
      }
    }
    if (fds.empty()) return;
    const size_t pending = fds.size();
    if (wake_) fds.push_back({wake_->fd(), POLLIN, 0});
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(idle_until - Clock::now()).count();
    const int n = ::poll(fds.data(), fds.size(), left > 0 ? static_cast<int>(left) : 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw CommError(std::string("poll: ") + std::strerror(errno));
    }
    if (wake_ && (fds[pending].revents & POLLIN)) {
      throw WaitInterrupted(fmt::format("the lighthouse called quorum {} off", quorum_));
    }
    if (n == 0) {
      std::string waiting;
      for (size_t i = 0; i < pending; ++i) {
        const auto [is_send, idx] = owner[i];
        const int peer = is_send ? out[idx].peer : in[idx].peer;
        waiting += fmt::format("{}{} {}", waiting.empty() ? "" : ", ",
                               is_send ? "sending to" : "receiving from", peer_name(peer));
      }
      throw PeerTimeout(
          fmt::format("quorum {}: no progress for {} s ({})", quorum_, idle_timeout_s_, waiting));
    }
    bool progressed = false;
    for (size_t i = 0; i < pending; ++i) {
      if (fds[i].revents == 0) continue;
      const auto [is_send, idx] = owner[i];
      if (is_send) {
        Outgoing& o = out[idx];
        while (o.done < o.total()) {
          const char* p = o.done < kHeaderBytes ? reinterpret_cast<const char*>(o.header) + o.done
                                                : o.data + (o.done - kHeaderBytes);
          const size_t chunk = o.done < kHeaderBytes ? kHeaderBytes - o.done : o.total() - o.done;
          const ssize_t w = ::send(o.fd, p, chunk, MSG_NOSIGNAL);
          if (w > 0) {
            o.done += static_cast<size_t>(w);
            bytes_sent_ += w;
            progressed = true;
            continue;
          }
          if (w < 0 && errno == EINTR) continue;
          if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          throw PeerLost(fmt::format("quorum {}: sending to {}: {}", quorum_, peer_name(o.peer),
                                     std::strerror(errno)));
        }
      } else {
        Incoming& r = in[idx];
        while (r.done < r.total()) {
          char* p = r.done < kHeaderBytes ? reinterpret_cast<char*>(r.header) + r.done
                                          : r.data + (r.done - kHeaderBytes);
          const size_t chunk = r.done < kHeaderBytes ? kHeaderBytes - r.done : r.total() - r.done;
          const ssize_t got = ::recv(r.fd, p, chunk, 0);
          if (got > 0) {
            r.done += static_cast<size_t>(got);
            bytes_received_ += got;
            progressed = true;
            if (r.done == kHeaderBytes) {
              const auto magic = static_cast<uint32_t>(get(r.header, 4));
              const auto their_tag = static_cast<int>(static_cast<uint32_t>(get(r.header + 4, 4)));
              const auto their_quorum = static_cast<int64_t>(get(r.header + 8, 8));
              const uint64_t length = get(r.header + 16, 8);
              if (magic != kMagic || their_tag != tag || their_quorum != quorum_ ||
                  length != r.bytes) {
                throw ProtocolError(fmt::format(
                    "quorum {}: {} sent a message for quorum {} (tag {}, {} bytes) where this "
                    "member expected tag {} and {} bytes",
                    quorum_, peer_name(r.peer), their_quorum, their_tag, length, tag, r.bytes));
              }
            }
            continue;
          }
          if (got == 0) {
            throw PeerLost(
                fmt::format("quorum {}: {} closed the connection", quorum_, peer_name(r.peer)));
          }
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          throw PeerLost(fmt::format("quorum {}: receiving from {}: {}", quorum_, peer_name(r.peer),
                                     std::strerror(errno)));
        }
      }
      if ((fds[i].revents & (POLLERR | POLLHUP)) && !progressed) {
        const int peer = is_send ? out[idx].peer : in[idx].peer;
        throw PeerLost(
            fmt::format("quorum {}: the connection to {} broke", quorum_, peer_name(peer)));
      }
    }
    if (progressed) idle_until = deadline_in(idle_timeout_s_);
  }
}

}  // namespace autoloco
