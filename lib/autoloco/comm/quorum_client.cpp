#include "autoloco/comm/quorum_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

namespace autoloco {
namespace {

// Control frames are small: one that takes longer than this to move means the connection is
// gone.
constexpr double kFrameSeconds = 10.0;

}  // namespace

QuorumClient::QuorumClient(QuorumClientOptions options, int64_t committed, std::string hash,
                           Log log)
    : options_(std::move(options)),
      log_(std::move(log)),
      committed_(committed),
      hash_(std::move(hash)) {
  if (!connect_and_hello(deadline_in(options_.reconnect_s))) {
    throw CommError(fmt::format(
        "cannot reach the lighthouse at {} within {} s (elastic.quorum_timeout_s): {}; start "
        "autoloco-lighthouse there, or check elastic.lighthouse and the firewall",
        options_.lighthouse.str(), options_.reconnect_s, fatal_));
  }
  if (!fatal_.empty()) throw CommError(fatal_);
  thread_ = std::thread([this] { loop(); });
}

QuorumClient::~QuorumClient() {
  stop_.signal();
  if (thread_.joinable()) thread_.join();
}

bool QuorumClient::connect_and_hello(Deadline deadline) {
  double backoff = 0.05;
  while (true) {
    try {
      socket_ =
          connect_tcp(options_.lighthouse, std::min(deadline, deadline_in(kFrameSeconds)), &stop_);
      local_address_ = local_host(socket_);
      ControlMessage hello("hello");
      hello.set("dc", int64_t{options_.dc});
      hello.set("member", int64_t{options_.member});
      hello.set("members", int64_t{options_.members});
      hello.set("incarnation", options_.incarnation);
      hello.set(
          "endpoint",
          fmt::format("{}:{}", options_.advertise.empty() ? local_address_ : options_.advertise,
                      options_.port));
      {
        std::lock_guard<std::mutex> lock(mutex_);
        hello.set("committed", committed_);
        hello.set("hash", hash_.empty() ? std::string("none") : hash_);
      }
      for (const auto& [k, v] : options_.identity)
        hello.set(k, v);
      client_handshake(socket_, options_.key, hello, session_, deadline_in(kFrameSeconds), &stop_,
                       "the lighthouse at " + options_.lighthouse.str());
      return true;
    } catch (const AuthError& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      fatal_ = e.what();
      return true;  // reached, and refused: no retry
    } catch (const WaitInterrupted&) {
      return false;
    } catch (const CommError& e) {
      // Retried until the deadline (a lighthouse not up yet, a link still down); only the last
      // failure is the error.
      socket_.close();
      if (Clock::now() + std::chrono::duration<double>(backoff) >= deadline) {
        std::lock_guard<std::mutex> lock(mutex_);
        fatal_ = e.what();
        return false;
      }
      pollfd p{stop_.fd(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(backoff * 1000)) > 0) return false;
      backoff = std::min(backoff * 2, 2.0);
    }
  }
}

void QuorumClient::deliver(ControlMessage m) {
  // Only member 0 takes decisions; the others' connection is for heartbeats and call-offs.
  if (options_.member != 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  inbox_.push_back(std::move(m));
  cv_.notify_all();
}

void QuorumClient::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fatal_ = why;
  }
  wake_.signal();
  cv_.notify_all();
}

void QuorumClient::set_state(int64_t committed, const std::string& hash) {
  std::lock_guard<std::mutex> lock(mutex_);
  committed_ = committed;
  hash_ = hash;
}

void QuorumClient::send(const ControlMessage& m) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outbox_.push_back(m);
    ++queued_;
  }
  outbox_ready_.signal();
}

void QuorumClient::flush(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_until(lock, deadline, [&] { return sent_ >= queued_ || !fatal_.empty(); });
}

ControlMessage QuorumClient::next(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (!inbox_.empty()) {
      ControlMessage m = std::move(inbox_.front());
      inbox_.pop_front();
      return m;
    }
    if (!fatal_.empty()) throw CommError(fatal_);
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && inbox_.empty() &&
        fatal_.empty()) {
      throw PeerTimeout("no decision from the lighthouse within elastic.quorum_timeout_s");
    }
  }
}

int64_t QuorumClient::rearm() {
  wake_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

void QuorumClient::reconnect() {
  socket_.close();
  wake_.signal();  // whatever quorum was in flight cannot commit without the lighthouse
  deliver(ControlMessage("lost"));
  log_(fmt::format("lost the lighthouse at {}; reconnecting", options_.lighthouse.str()));
  const bool reached = connect_and_hello(deadline_in(options_.reconnect_s));
  if (!reached) {
    fail(fmt::format("the lighthouse at {} was unreachable for {} s (elastic.quorum_timeout_s)",
                     options_.lighthouse.str(), options_.reconnect_s));
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fatal_.empty()) {
    wake_.signal();
    cv_.notify_all();
  }
}

void QuorumClient::loop() {
  Deadline next_beat = deadline_in(options_.heartbeat_s);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!fatal_.empty()) return;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - Clock::now()).count();
    pollfd fds[3] = {
        {socket_.fd(), POLLIN, 0}, {outbox_ready_.fd(), POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
    const int n = ::poll(fds, 3, left > 0 ? static_cast<int>(left) : 0);
    if (n < 0) continue;
    if (fds[2].revents & POLLIN) return;
    const std::string what = "the lighthouse at " + options_.lighthouse.str();
    try {
      if (fds[1].revents & POLLIN) {
        outbox_ready_.clear();
        std::deque<ControlMessage> out;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          out.swap(outbox_);
        }
        for (const ControlMessage& m : out)
          send_message(socket_, session_, m, deadline_in(kFrameSeconds), &stop_, what);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          sent_ += static_cast<int64_t>(out.size());
        }
        cv_.notify_all();
      }
      if (Clock::now() >= next_beat) {
        send_message(socket_, session_, ControlMessage("heartbeat"), deadline_in(kFrameSeconds),
                     &stop_, what);
        next_beat = deadline_in(options_.heartbeat_s);
      }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ControlMessage m =
            receive_message(socket_, session_, deadline_in(kFrameSeconds), &stop_, what);
        if (m.type() == "refused" && m.integer_or("retry", 0) == 1) {
          log_("the lighthouse: " + m.text("reason") + "; trying again");
          pollfd p{stop_.fd(), POLLIN, 0};
          if (::poll(&p, 1, static_cast<int>(options_.heartbeat_s * 2000)) > 0) return;
          throw PeerLost("refused for now");
        }
        if (m.type() == "dropped") {
          // Taken for dead (frozen, or cut off) and back: join again, as a restart would, and
          // be healed if the run went on without this dc.
          log_("the lighthouse dropped this dc: " + m.text("reason") + "; joining again");
          throw PeerLost("dropped by the lighthouse");
        }
        if (m.type() == "refused") {
          fail("the lighthouse refused this dc: " + m.text("reason"));
          return;
        }
        if (m.type() == "abort") {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            aborted_ = std::max(aborted_, m.integer("quorum"));
          }
          wake_.signal();
        }
        deliver(std::move(m));
      }
    } catch (const WaitInterrupted&) {
      return;  // stopping
    } catch (const CommError&) {
      reconnect();
      next_beat = deadline_in(options_.heartbeat_s);
    }
  }
}

}  // namespace autoloco
