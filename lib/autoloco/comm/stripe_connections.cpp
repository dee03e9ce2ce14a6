#include "autoloco/comm/stripe_connections.hpp"

#include <poll.h>

#include <fmt/format.h>

#include "autoloco/comm/handshake.hpp"

namespace autoloco {

StripeConnections::StripeConnections(Identity me, const Endpoint& listen_at,
                                     double handshake_timeout_s)
    : me_(std::move(me)),
      handshake_timeout_s_(handshake_timeout_s),
      listener_(listen_tcp(listen_at)),
      port_(local_port(listener_)) {
  thread_ = std::thread([this] { accept_loop(); });
}

StripeConnections::~StripeConnections() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.signal();
  arrived_.notify_all();
  thread_.join();
}

void StripeConnections::accept_loop() {
  while (true) {
    pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) continue;  // EINTR
    if (fds[1].revents & POLLIN) return;
    if (fds[0].revents & POLLIN) {
      while (true) {
        Socket s = accept_tcp(listener_);
        if (!s.valid()) break;
        admit(std::move(s));
      }
    }
  }
}

void StripeConnections::admit(Socket s) {
  // The handshake of one connection at a time, bounded: a client that stalls it delays the
  // others by at most handshake_timeout_s.
  const Deadline deadline = deadline_in(handshake_timeout_s_);
  const std::string who = peer_address(s);
  try {
    ServerHandshake hs(me_.key);
    write_frame(s, hs.challenge().encode(), deadline, &stop_, who);
    const ControlMessage hello =
        ControlMessage::decode(read_frame(s, ControlMessage::kMaxBytes, deadline, &stop_, who));
    Session session;
    ControlMessage welcome;
    try {
      welcome = hs.accept(hello, session);
    } catch (const AuthError&) {
      ControlMessage refused("refused");
      refused.set("reason", std::string("wrong key"));
      write_frame(s, refused.encode(), deadline, &stop_, who);
      throw;
    }
    if (hello.integer("member") != me_.member) {
      ControlMessage refused("refused");
      refused.set("reason", fmt::format("member {} of dc {} dialled member {}",
                                        hello.integer("member"), hello.integer("dc"), me_.member));
      write_frame(s, refused.encode(), deadline, &stop_, who);
      throw ProtocolError(refused.text("reason"));
    }
    write_frame(s, welcome.encode(), deadline, &stop_, who);
    const auto key = std::make_tuple(hello.integer("quorum"), hello.text("purpose"),
                                     static_cast<int>(hello.integer("dc")));
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_[key] = std::move(s);
    arrived_.notify_all();
  } catch (const CommError&) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++refused_;
  }
}

Socket StripeConnections::dial(int64_t quorum, const std::string& purpose, int dc,
                               const Endpoint& at, Deadline deadline, const Wakeup* wake) {
  Socket s = connect_tcp(at, deadline, wake);
  ControlMessage hello("hello");
  hello.set("dc", int64_t{me_.dc});
  hello.set("member", int64_t{me_.member});
  hello.set("incarnation", me_.incarnation);
  hello.set("quorum", quorum);
  hello.set("purpose", purpose);
  Session session;
  client_handshake(s, me_.key, hello, session, deadline, wake,
                   fmt::format("dc {} member {} ({})", dc, me_.member, at.str()));
  return s;
}

Socket StripeConnections::take(int64_t quorum, const std::string& purpose, int dc,
                               Deadline deadline, const Wakeup* wake) {
  const auto key = std::make_tuple(quorum, purpose, dc);
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const auto it = waiting_.find(key);
    if (it != waiting_.end()) {
      Socket s = std::move(it->second);
      waiting_.erase(it);
      return s;
    }
    if (stopping_) throw CommError("the stripe's listener stopped");
    if (wake) {
      pollfd p{wake->fd(), POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) {
        throw WaitInterrupted(
            fmt::format("waiting for dc {} member {}: called off", dc, me_.member));
      }
    }
    if (Clock::now() >= deadline) {
      throw PeerTimeout(fmt::format("quorum {}: dc {} member {} did not connect in time", quorum,
                                    dc, me_.member));
    }
    // Short slices: the wake-up is an fd, not this condition variable.
    arrived_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

std::vector<Socket> StripeConnections::connect_group(int64_t quorum, const std::vector<int>& dcs,
                                                     const std::vector<Endpoint>& endpoints,
                                                     Deadline deadline, const Wakeup* wake) {
  std::vector<Socket> sockets(dcs.size());
  // Dial the lower ids first, then take what the higher ones dialled: every dial is answered by
  // the listener's thread, so no two members wait on each other.
  for (size_t i = 0; i < dcs.size() && dcs[i] < me_.dc; ++i)
    sockets[i] = dial(quorum, "stripe", dcs[i], endpoints[i], deadline, wake);
  for (size_t i = 0; i < dcs.size(); ++i) {
    if (dcs[i] > me_.dc) sockets[i] = take(quorum, "stripe", dcs[i], deadline, wake);
  }
  return sockets;
}

void StripeConnections::forget_before(int64_t quorum) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    it = std::get<0>(it->first) < quorum ? waiting_.erase(it) : std::next(it);
  }
}

int64_t StripeConnections::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

}  // namespace autoloco
