// comm/quorum_client.hpp against a real lighthouse server over loopback: a round decided and
// committed, a dc dropped when one of its members goes and back when it is whole, and a
// lighthouse restart survived.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "autoloco/comm/lighthouse_server.hpp"
#include "autoloco/comm/quorum_client.hpp"

using namespace autoloco;

namespace {

const std::string kKey = "quorum-client-test-key-42";

struct Lighthouse {
  std::atomic<bool> stop{false};
  std::unique_ptr<LighthouseServer> server;
  std::thread thread;
  explicit Lighthouse(int port = 0) {
    LighthouseOptions o;
    o.listen = {"127.0.0.1", port};
    o.key = kKey;
    o.tick_s = 0.01;
    server = std::make_unique<LighthouseServer>(o, [](const std::string&) {});
    thread = std::thread([this] { server->run(stop); });
  }
  ~Lighthouse() {
    stop = true;
    thread.join();
  }
};

QuorumClientOptions options(int port, int dc, int member = 0, int members = 1) {
  QuorumClientOptions o;
  o.lighthouse = {"127.0.0.1", port};
  o.key = kKey;
  o.dc = dc;
  o.member = member;
  o.members = members;
  o.incarnation = "inc" + std::to_string(dc);
  o.port = 30000 + dc;
  o.heartbeat_s = 0.05;
  o.reconnect_s = 30;
  o.identity = {{"run.model", "tiny"}, {"run.heartbeat_timeout_s", "5"}};
  return o;
}

ControlMessage next_of(QuorumClient& c, const std::string& type) {
  while (true) {
    ControlMessage m = c.next(deadline_in(20));
    if (m.type() == type) return m;
  }
}

}  // namespace

TEST_CASE("quorum client: two dcs get one decision, report, and commit", "[elastic]") {
  Lighthouse lh;
  const int port = lh.server->port();
  QuorumClient a(options(port, 0), 0, "h0", [](const std::string&) {});
  QuorumClient b(options(port, 1), 0, "h0", [](const std::string&) {});
  CHECK(next_of(a, "status").text("action") == "train");
  CHECK(next_of(b, "status").text("action") == "train");
  CHECK(a.local_address() == "127.0.0.1");
  ControlMessage ready("ready");
  ready.set("round", int64_t{1});
  a.send(ready);
  b.send(ready);
  const ControlMessage qa = next_of(a, "quorum");
  const ControlMessage qb = next_of(b, "quorum");
  CHECK(qa.encode() == qb.encode());
  CHECK(qa.text("ep.1") == "127.0.0.1:30001");
  for (QuorumClient* c : {&a, &b}) {
    ControlMessage result("result");
    result.set("quorum", qa.integer("quorum"));
    result.set("ok", int64_t{1});
    c->send(result);
  }
  CHECK(next_of(a, "commit").integer("round") == 1);
  CHECK(next_of(b, "commit").integer("round") == 1);
}

TEST_CASE("quorum client: a dc dropped when one member goes joins again once it is whole",
          "[elastic]") {
  Lighthouse lh;
  const int port = lh.server->port();
  std::mutex mutex;
  std::string log;
  QuorumClient m0(options(port, 0, 0, 2), 0, "h0", [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    log += line + "\n";
  });
  auto m1 =
      std::make_unique<QuorumClient>(options(port, 0, 1, 2), 0, "h0", [](const std::string&) {});
  CHECK(next_of(m0, "status").text("action") == "train");
  m1.reset();  // its connection closes, as a partitioned process's would
  // Dropped: what was in flight is lost, and member 0 says hello again.
  CHECK(next_of(m0, "lost").type() == "lost");
  {
    std::lock_guard<std::mutex> lock(mutex);
    CHECK_THAT(log, Catch::Contains("dropped this dc") &&
                        Catch::Contains("member 1's connection closed") &&
                        Catch::Contains("joining again"));
  }
  // Whole again: the dc is back in the run.
  m1 = std::make_unique<QuorumClient>(options(port, 0, 1, 2), 0, "h0", [](const std::string&) {});
  CHECK(next_of(m0, "status").text("action") == "train");
}

TEST_CASE("quorum client: a restarted lighthouse is found again, and the dc carries on",
          "[elastic]") {
  auto lh = std::make_unique<Lighthouse>();
  const int port = lh->server->port();
  QuorumClient a(options(port, 0), 3, "h3", [](const std::string&) {});
  CHECK(next_of(a, "status").text("action") == "train");
  a.set_state(4, "h4");
  lh.reset();
  lh = std::make_unique<Lighthouse>(port);
  CHECK(a.next(deadline_in(20)).type() == "lost");
  const ControlMessage status = next_of(a, "status");
  CHECK(status.text("action") == "train");
  CHECK(status.integer("round") == 4);  // the new lighthouse learnt the run's round from the dc
}

TEST_CASE("quorum client: a lighthouse that comes up after the dc is reached once it does",
          "[elastic]") {
  int port = 0;
  {
    const Lighthouse gone;
    port = gone.server->port();
  }
  // Refused connections until it is up: retried, and not remembered as the error once it is.
  std::unique_ptr<Lighthouse> lh;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    lh = std::make_unique<Lighthouse>(port);
  });
  QuorumClient a(options(port, 0), 0, "h0", [](const std::string&) {});
  later.join();
  CHECK(next_of(a, "status").text("action") == "train");
}
