// comm/quorum_client.hpp against a real lighthouse server over loopback: a round decided and
// committed, a dc dropped when one of its members goes, and a lighthouse restart survived.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
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

TEST_CASE("quorum client: when one member of a dc goes, the dc is dropped and told so",
          "[elastic]") {
  Lighthouse lh;
  const int port = lh.server->port();
  QuorumClient m0(options(port, 0, 0, 2), 0, "h0", [](const std::string&) {});
  auto m1 =
      std::make_unique<QuorumClient>(options(port, 0, 1, 2), 0, "h0", [](const std::string&) {});
  CHECK(next_of(m0, "status").text("action") == "train");
  m1.reset();  // its connection closes, as a killed process's would
  CHECK_THROWS_WITH(next_of(m0, "never"), Catch::Contains("dropped this dc") &&
                                              Catch::Contains("member 1's connection closed"));
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
