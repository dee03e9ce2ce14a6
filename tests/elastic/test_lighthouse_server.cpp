// comm/lighthouse_server.hpp over loopback: the key's handshake, a client without the key
// refused and named in the log while the run goes on, garbage dropped.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "autoloco/comm/handshake.hpp"
#include "autoloco/comm/lighthouse_server.hpp"

using namespace autoloco;

namespace {

const std::string kKey = "0123456789abcdef0123456789abcdef";

struct RunningLighthouse {
  std::mutex mutex;
  std::vector<std::string> log;
  std::atomic<bool> stop{false};
  std::unique_ptr<LighthouseServer> server;
  std::thread thread;

  RunningLighthouse() {
    LighthouseOptions o;
    o.listen = {"127.0.0.1", 0};
    o.key = kKey;
    o.tick_s = 0.01;
    server = std::make_unique<LighthouseServer>(o, [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      log.push_back(line);
    });
    thread = std::thread([this] { server->run(stop); });
  }
  ~RunningLighthouse() {
    stop = true;
    thread.join();
  }
  Endpoint endpoint() const { return {"127.0.0.1", server->port()}; }
  bool logged(const std::string& words) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& l : log) {
      if (l.find(words) != std::string::npos) return true;
    }
    return false;
  }
};

ControlMessage hello_of(int dc) {
  ControlMessage h("hello");
  h.set("dc", int64_t{dc});
  h.set("member", int64_t{0});
  h.set("members", int64_t{1});
  h.set("incarnation", "inc" + std::to_string(dc));
  h.set("endpoint", std::string("127.0.0.1:1"));
  h.set("committed", int64_t{0});
  h.set("hash", std::string("h0"));
  h.set("run.model", std::string("tiny"));
  return h;
}

struct Client {
  Socket socket;
  Session session;
  Client(const Endpoint& at, const std::string& key, const ControlMessage& hello)
      : socket(connect_tcp(at, deadline_in(10), nullptr)) {
    client_handshake(socket, key, hello, session, deadline_in(10), nullptr, "the lighthouse");
  }
  void send(const ControlMessage& m) {
    send_message(socket, session, m, deadline_in(10), nullptr, "the lighthouse");
  }
  ControlMessage receive() {
    return receive_message(socket, session, deadline_in(10), nullptr, "the lighthouse");
  }
};

}  // namespace

TEST_CASE("lighthouse: a client with the key joins, one without is refused and named",
          "[elastic]") {
  RunningLighthouse lh;
  Client dc0(lh.endpoint(), kKey, hello_of(0));
  const ControlMessage status = dc0.receive();
  CHECK(status.type() == "status");
  CHECK(status.text("action") == "train");

  // Wrong key: refused before its hello reaches the rules.
  CHECK_THROWS_AS(Client(lh.endpoint(), "not the key, but long enough", hello_of(1)), AuthError);
  // Garbage in place of a hello: dropped.
  {
    Socket s = connect_tcp(lh.endpoint(), deadline_in(10), nullptr);
    read_frame(s, 1 << 16, deadline_in(10), nullptr, "lh");  // the challenge
    write_frame(s, "\x01\x02garbage", deadline_in(10), nullptr, "lh");
    char byte;
    CHECK_THROWS_AS(read_exact(s, &byte, 1, deadline_in(10), nullptr, "lh"), PeerLost);
  }
  // The run goes on as without them: dc 0 alone reaches round 1's boundary and gets its quorum.
  ControlMessage ready("ready");
  ready.set("round", int64_t{1});
  dc0.send(ready);
  const ControlMessage q = dc0.receive();
  CHECK(q.type() == "quorum");
  CHECK(q.text("members") == "0");
  CHECK(lh.logged("refused a client from 127.0.0.1"));
  CHECK(lh.logged("wrong key"));
  CHECK(lh.logged("dropped a client (127.0.0.1"));
}

TEST_CASE("lighthouse: a client that does not hold the key cannot tell a lighthouse that does",
          "[elastic]") {
  // The client side checks the welcome's MAC too: an impostor lighthouse is found out.
  RunningLighthouse lh;
  try {
    Client c(lh.endpoint(), "another key of sixteen bytes or more", hello_of(0));
    FAIL("the handshake succeeded with a wrong key");
  } catch (const AuthError& e) {
    CHECK_THAT(e.what(), Catch::Contains("refused"));
  }
}
