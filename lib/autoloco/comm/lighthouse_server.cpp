#include "autoloco/comm/lighthouse_server.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "autoloco/comm/handshake.hpp"

namespace autoloco {

struct LighthouseServer::Client {
  ConnId id = 0;
  Socket socket;
  std::string address;
  std::string in;
  std::string out;
  ServerHandshake handshake;
  Session session;
  bool authenticated = false;
  bool closing = false;  // drop once `out` is flushed
  bool dead = false;
  double connected_at = 0.0;
  std::string who;  // "dc K member m" once its hello was read

  Client(std::string key) : handshake(std::move(key)) {}
};

namespace {

// Quorum ids of this start: above every id a previous start of the lighthouse gave out (the
// wall clock's milliseconds), so that the dcs' connections and call-offs of the old one never
// match the new one's quorums.
QuorumSettings with_fresh_ids(QuorumSettings s) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  s.first_quorum_id = static_cast<int64_t>(ms.count());
  return s;
}

}  // namespace

LighthouseServer::LighthouseServer(LighthouseOptions options, Log log)
    : options_(std::move(options)),
      log_(std::move(log)),
      listener_(listen_tcp(options_.listen)),
      port_(local_port(listener_)),
      rules_(with_fresh_ids(options_.settings), log_),
      start_(Clock::now()) {}

LighthouseServer::~LighthouseServer() = default;

double LighthouseServer::now() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

namespace {

std::string frame_of(std::string_view payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::string f(4, '\0');
  for (int i = 0; i < 4; ++i)
    f[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  f.append(payload);
  return f;
}

}  // namespace

void LighthouseServer::queue_plain(Client& c, const ControlMessage& m) {
  c.out += frame_of(m.encode());
}

void LighthouseServer::queue_sealed(Client& c, const ControlMessage& m) {
  c.out += frame_of(seal(c.session, m.encode()));
}

void LighthouseServer::drop(Client& c, const std::string& why, double t) {
  if (c.dead) return;
  c.dead = true;
  if (!why.empty())
    log_(fmt::format("dropped {} ({}): {}", c.who.empty() ? "a client" : c.who, c.address, why));
  deliver(rules_.on_closed(c.id, t));
}

void LighthouseServer::deliver(std::vector<Outgoing> out) {
  for (Outgoing& o : out) {
    for (auto& c : clients_) {
      if (c->id != o.to || c->dead) continue;
      if (c->authenticated) {
        queue_sealed(*c, o.message);
      } else {
        queue_plain(*c, o.message);
      }
      if (o.close) c->closing = true;
    }
  }
}

void LighthouseServer::accept_clients(double t) {
  while (true) {
    Socket s = accept_tcp(listener_);
    if (!s.valid()) return;
    if (static_cast<int>(clients_.size()) >= options_.max_clients) {
      log_(fmt::format("refused a connection from {}: {} clients already", peer_address(s),
                       options_.max_clients));
      continue;
    }
    auto c = std::make_unique<Client>(options_.key);
    c->id = next_conn_++;
    c->address = peer_address(s);
    c->socket = std::move(s);
    c->connected_at = t;
    queue_plain(*c, c->handshake.challenge());
    clients_.push_back(std::move(c));
  }
}

void LighthouseServer::handle_frame(Client& c, const std::string& frame, double t) {
  if (!c.authenticated) {
    const ControlMessage hello = ControlMessage::decode(frame);
    try {
      const ControlMessage welcome = c.handshake.accept(hello, c.session);
      queue_plain(c, welcome);
    } catch (const AuthError& e) {
      ControlMessage refused("refused");
      refused.set("reason", std::string("wrong key"));
      queue_plain(c, refused);
      c.closing = true;
      log_(fmt::format("refused a client from {} (it said dc {} member {}): {}", c.address,
                       hello.has("dc") ? hello.text("dc") : "?",
                       hello.has("member") ? hello.text("member") : "?", e.what()));
      return;
    }
    c.authenticated = true;
    c.who = fmt::format("dc {} member {}", hello.has("dc") ? hello.text("dc") : "?",
                        hello.has("member") ? hello.text("member") : "?");
    deliver(rules_.on_hello(c.id, hello, t));
    return;
  }
  const ControlMessage m = ControlMessage::decode(open_sealed(c.session, frame));
  deliver(rules_.on_message(c.id, m, t));
}

void LighthouseServer::read_from(Client& c, double t) {
  char buffer[16384];
  while (!c.dead && !c.closing) {
    const ssize_t n = ::recv(c.socket.fd(), buffer, sizeof(buffer), 0);
    if (n == 0) {
      drop(c, "", t);
      if (!c.who.empty()) log_(fmt::format("{} ({}) disconnected", c.who, c.address));
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      drop(c, std::strerror(errno), t);
      return;
    }
    c.in.append(buffer, static_cast<size_t>(n));
    while (c.in.size() >= 4 && !c.dead && !c.closing) {
      const uint32_t len = static_cast<uint8_t>(c.in[0]) | (static_cast<uint8_t>(c.in[1]) << 8) |
                           (static_cast<uint8_t>(c.in[2]) << 16) |
                           (static_cast<uint32_t>(static_cast<uint8_t>(c.in[3])) << 24);
      if (len > ControlMessage::kMaxBytes + 64) {
        drop(c, fmt::format("a frame of {} bytes", len), t);
        return;
      }
      if (c.in.size() < 4 + static_cast<size_t>(len)) break;
      const std::string frame = c.in.substr(4, len);
      c.in.erase(0, 4 + static_cast<size_t>(len));
      try {
        handle_frame(c, frame, t);
      } catch (const ProtocolError& e) {
        drop(c, e.what(), t);
        return;
      }
    }
  }
}

void LighthouseServer::run(const std::atomic<bool>& stop) {
  log_(fmt::format("listening on {}:{}", options_.listen.host, port_));
  double last_tick = now();
  while (!stop.load()) {
    std::vector<pollfd> fds;
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& c : clients_) {
      short events = c->closing ? 0 : POLLIN;
      if (!c->out.empty()) events |= POLLOUT;
      fds.push_back({c->socket.fd(), events, 0});
    }
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(options_.tick_s * 1000));
    if (n < 0 && errno != EINTR) throw CommError(std::string("poll: ") + std::strerror(errno));
    const double t = now();
    if (n > 0) {
      if (fds[0].revents & POLLIN) accept_clients(t);
      for (size_t i = 1; i < fds.size() && i - 1 < clients_.size(); ++i) {
        Client& c = *clients_[i - 1];
        if (c.dead) continue;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(c, t);
        if (!c.dead && (fds[i].revents & POLLOUT) && !c.out.empty()) {
          const ssize_t w = ::send(c.socket.fd(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
          if (w > 0) {
            c.out.erase(0, static_cast<size_t>(w));
          } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            drop(c, std::strerror(errno), t);
          }
        }
      }
    }
    if (t - last_tick >= options_.tick_s) {
      deliver(rules_.tick(t));
      last_tick = t;
    }
    for (auto& c : clients_) {
      if (!c->authenticated && !c->dead && t - c->connected_at > options_.handshake_timeout_s) {
        log_(fmt::format("closed a connection from {}: no handshake within {} s", c->address,
                         options_.handshake_timeout_s));
        c->dead = true;
      }
      if (c->closing && c->out.empty() && !c->dead) drop(*c, "", t);
    }
    clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                  [](const std::unique_ptr<Client>& c) { return c->dead; }),
                   clients_.end());
  }
  log_("stopped");
}

}  // namespace autoloco
