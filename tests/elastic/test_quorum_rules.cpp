// comm/quorum_rules.hpp: the lighthouse's decisions, driven by messages and a clock of our own.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autoloco/comm/quorum_rules.hpp"

using namespace autoloco;

namespace {

ConnId conn_of(int dc, int member) {
  return dc * 100 + member + 1;
}

ControlMessage hello(int dc, int member, int members, const std::string& incarnation,
                     int64_t committed = 0, const std::string& hash = "h0",
                     const std::string& model = "tiny") {
  ControlMessage m("hello");
  m.set("dc", int64_t{dc});
  m.set("member", int64_t{member});
  m.set("members", int64_t{members});
  m.set("incarnation", incarnation);
  m.set("endpoint", "10.0.0." + std::to_string(dc) + ":" + std::to_string(29500 + member));
  m.set("committed", committed);
  m.set("hash", hash);
  m.set("run.model", model);
  return m;
}

ControlMessage msg(const std::string& type, std::vector<std::pair<std::string, std::string>> kv) {
  ControlMessage m(type);
  for (auto& [k, v] : kv)
    m.set(k, v);
  return m;
}

const Outgoing* find(const std::vector<Outgoing>& out, ConnId to, const std::string& type) {
  for (const Outgoing& o : out) {
    if (o.to == to && o.message.type() == type) return &o;
  }
  return nullptr;
}

struct Lighthouse {
  std::vector<std::string> log;
  QuorumRules rules;
  explicit Lighthouse(QuorumSettings s = {})
      : rules(s, [this](const std::string& line) { log.push_back(line); }) {}

  // Every member of `dc` says hello; returns what the last hello produced.
  std::vector<Outgoing> join(int dc, int members, double now, int64_t committed = 0,
                             const std::string& hash = "h0", const std::string& inc = "") {
    std::vector<Outgoing> out;
    for (int m = 0; m < members; ++m) {
      auto o = rules.on_hello(
          conn_of(dc, m),
          hello(dc, m, members, inc.empty() ? "inc" + std::to_string(dc) : inc, committed, hash),
          now);
      out.insert(out.end(), o.begin(), o.end());
    }
    return out;
  }
  std::vector<Outgoing> ready(int dc, int64_t round, double now) {
    return rules.on_message(conn_of(dc, 0), msg("ready", {{"round", std::to_string(round)}}), now);
  }
  std::vector<Outgoing> result(int dc, int64_t quorum, bool ok, double now) {
    return rules.on_message(
        conn_of(dc, 0), msg("result", {{"quorum", std::to_string(quorum)}, {"ok", ok ? "1" : "0"}}),
        now);
  }
  std::vector<Outgoing> state(int dc, int64_t committed, const std::string& hash, double now) {
    return rules.on_message(
        conn_of(dc, 0), msg("state", {{"committed", std::to_string(committed)}, {"hash", hash}}),
        now);
  }
  std::vector<Outgoing> heartbeat(int dc, int members, double now) {
    std::vector<Outgoing> out;
    for (int m = 0; m < members; ++m) {
      auto o = rules.on_message(conn_of(dc, m), ControlMessage("heartbeat"), now);
      out.insert(out.end(), o.begin(), o.end());
    }
    return out;
  }
  // A whole round among `dcs` (all ready at `now`, all ok, all report `hash`).
  int64_t round(const std::vector<int>& dcs, int64_t r, double now, const std::string& hash) {
    std::vector<Outgoing> out;
    for (const int d : dcs)
      out = ready(d, r, now);
    const Outgoing* q = find(out, conn_of(dcs.front(), 0), "quorum");
    REQUIRE(q != nullptr);
    const int64_t id = q->message.integer("quorum");
    for (const int d : dcs)
      out = result(d, id, true, now);
    for (const int d : dcs)
      REQUIRE(find(out, conn_of(d, 0), "commit") != nullptr);
    for (const int d : dcs)
      state(d, r, hash, now);
    return id;
  }
};

}  // namespace

TEST_CASE("quorum: dcs that all reach the boundary sync at once and commit together", "[elastic]") {
  Lighthouse lh;
  auto out = lh.join(0, 2, 0.0);
  REQUIRE(find(out, conn_of(0, 0), "status") != nullptr);
  CHECK(find(out, conn_of(0, 0), "status")->message.text("action") == "train");
  out = lh.join(1, 2, 0.1);
  CHECK(find(out, conn_of(1, 0), "status")->message.text("action") == "train");
  CHECK(lh.rules.live_dcs() == std::vector<int>{0, 1});

  out = lh.ready(0, 1, 1.0);
  CHECK(out.empty());  // dc 1 is still training, within the deadline
  out = lh.ready(1, 1, 1.5);
  const Outgoing* q0 = find(out, conn_of(0, 0), "quorum");
  const Outgoing* q1 = find(out, conn_of(1, 0), "quorum");
  REQUIRE(q0 != nullptr);
  REQUIRE(q1 != nullptr);
  CHECK(q0->message.encode() == q1->message.encode());  // one decision for all
  CHECK(q0->message.text("members") == "0,1");
  CHECK(q0->message.integer("round") == 1);
  CHECK(q0->message.text("ep.1") == "10.0.0.1:29500,10.0.0.1:29501");
  CHECK(find(out, conn_of(0, 1), "quorum") == nullptr);  // member 0 speaks for its dc

  const int64_t id = q0->message.integer("quorum");
  out = lh.result(0, id, true, 2.0);
  CHECK(find(out, conn_of(0, 0), "commit") == nullptr);  // all or none: dc 1 has not reported
  out = lh.result(1, id, true, 2.1);
  CHECK(find(out, conn_of(0, 0), "commit") != nullptr);
  CHECK(find(out, conn_of(1, 0), "commit") != nullptr);
  CHECK(lh.rules.committed_round() == 1);
}

TEST_CASE("quorum: a dc not at the boundary by the deadline is left out, then healed",
          "[elastic]") {
  QuorumSettings s;
  s.round_deadline_s = 10.0;
  Lighthouse lh(s);
  lh.join(0, 1, 0.0);
  lh.join(1, 1, 0.0);
  lh.join(2, 1, 0.0);
  lh.ready(0, 1, 1.0);
  lh.ready(1, 1, 2.0);
  for (int d = 0; d < 3; ++d)
    lh.heartbeat(d, 1, 10.5);
  auto out = lh.rules.tick(10.9);
  CHECK(find(out, conn_of(0, 0), "quorum") == nullptr);
  out = lh.rules.tick(11.1);
  const Outgoing* q = find(out, conn_of(0, 0), "quorum");
  REQUIRE(q != nullptr);
  CHECK(q->message.text("members") == "0,1");
  CHECK(find(out, conn_of(2, 0), "quorum") == nullptr);
  const int64_t id = q->message.integer("quorum");
  // The late dc reaches the boundary while the quorum runs: it waits, and once the round is
  // committed without it, it is told to heal.
  out = lh.ready(2, 1, 11.5);
  CHECK(out.empty());
  lh.result(0, id, true, 12.0);
  out = lh.result(1, id, true, 12.0);
  const Outgoing* status = find(out, conn_of(2, 0), "status");
  REQUIRE(status != nullptr);
  CHECK(status->message.text("action") == "heal");
  // At the next boundary it is healed from a member of the quorum, after the commit.
  lh.state(0, 1, "h1", 12.1);
  lh.state(1, 1, "h1", 12.1);
  out = lh.ready(0, 2, 13.0);
  CHECK(find(out, conn_of(0, 0), "serve") == nullptr);
  out = lh.ready(1, 2, 13.0);
  q = find(out, conn_of(0, 0), "quorum");
  REQUIRE(q != nullptr);
  CHECK(q->message.text("members") == "0,1");
  CHECK(q->message.text("heals") == "2<0");
  const Outgoing* heal = find(out, conn_of(2, 0), "heal");
  REQUIRE(heal != nullptr);
  CHECK(heal->message.integer("source") == 0);
  CHECK(heal->message.integer("round") == 2);
  CHECK(heal->message.text("ep.0") == "10.0.0.0:29500");
}

TEST_CASE("quorum: a member silent past the heartbeat timeout calls off the round in flight",
          "[elastic]") {
  QuorumSettings s;
  s.heartbeat_timeout_s = 2.0;
  Lighthouse lh(s);
  for (int d = 0; d < 3; ++d)
    lh.join(d, 2, 0.0);
  std::vector<Outgoing> out;
  for (int d = 0; d < 3; ++d)
    out = lh.ready(d, 1, 1.0);
  const int64_t id = find(out, conn_of(0, 0), "quorum")->message.integer("quorum");
  lh.result(0, id, true, 1.5);
  // dc 2 is frozen (SIGSTOP) inside the all-reduce: no heartbeat, no result.
  lh.heartbeat(0, 2, 2.5);
  lh.heartbeat(1, 2, 2.5);
  out = lh.rules.tick(3.2);
  // Every member of the survivors hears the abort (it wakes their all-reduce), the frozen dc is
  // dropped.
  for (int m = 0; m < 2; ++m) {
    CHECK(find(out, conn_of(0, m), "abort") != nullptr);
    CHECK(find(out, conn_of(1, m), "abort") != nullptr);
    const Outgoing* dropped = find(out, conn_of(2, m), "dropped");
    REQUIRE(dropped != nullptr);
    CHECK(dropped->close);
  }
  CHECK_THAT(find(out, conn_of(0, 0), "abort")->message.text("reason"),
             Catch::Contains("dc 2 left") && Catch::Contains("silent"));
  CHECK(lh.rules.live_dcs() == std::vector<int>{0, 1});
  // The survivors redo the round at once with the new quorum.
  lh.ready(0, 1, 3.3);
  out = lh.ready(1, 1, 3.3);
  const Outgoing* q = find(out, conn_of(0, 0), "quorum");
  REQUIRE(q != nullptr);
  CHECK(q->message.text("members") == "0,1");
  CHECK(q->message.integer("quorum") == id + 1);
  CHECK(q->message.integer("round") == 1);
}

TEST_CASE("quorum: a closed connection or a failed all-reduce calls the round off at once",
          "[elastic]") {
  Lighthouse lh;
  for (int d = 0; d < 3; ++d)
    lh.join(d, 1, 0.0);
  std::vector<Outgoing> out;
  for (int d = 0; d < 3; ++d)
    out = lh.ready(d, 1, 1.0);
  int64_t id = find(out, conn_of(0, 0), "quorum")->message.integer("quorum");
  out = lh.rules.on_closed(conn_of(2, 0), 1.1);  // SIGKILL: the kernel closes its sockets
  REQUIRE(find(out, conn_of(0, 0), "abort") != nullptr);
  CHECK(lh.rules.quorum_in_flight() == std::nullopt);

  lh.ready(0, 1, 1.2);
  out = lh.ready(1, 1, 1.2);
  id = find(out, conn_of(0, 0), "quorum")->message.integer("quorum");
  out = lh.result(1, id, false, 1.3);
  const Outgoing* abort = find(out, conn_of(0, 0), "abort");
  REQUIRE(abort != nullptr);
  CHECK_THAT(abort->message.text("reason"), Catch::Contains("dc 1"));
  // A late answer to the quorum called off changes nothing.
  out = lh.result(0, id, true, 1.4);
  CHECK(out.empty());
  CHECK(lh.rules.committed_round() == 0);
}

TEST_CASE("quorum: elastic.min_dcs holds the round until enough dcs are there", "[elastic]") {
  QuorumSettings s;
  s.min_dcs = 2;
  s.round_deadline_s = 1.0;
  Lighthouse lh(s);
  lh.join(0, 1, 0.0);
  auto out = lh.ready(0, 1, 0.5);
  CHECK(out.empty());
  out = lh.rules.tick(5.0);
  CHECK(find(out, conn_of(0, 0), "quorum") == nullptr);
  lh.heartbeat(0, 1, 5.0);
  lh.join(1, 1, 5.5);
  out = lh.ready(1, 1, 6.0);
  REQUIRE(find(out, conn_of(0, 0), "quorum") != nullptr);
}

TEST_CASE("quorum: a late dc is healed from a live member and then takes part", "[elastic]") {
  Lighthouse lh;
  lh.join(0, 2, 0.0);
  lh.join(1, 2, 0.0);
  lh.round({0, 1}, 1, 1.0, "h1");
  lh.round({0, 1}, 2, 2.0, "h2");
  // A new dc (or a restarted one from an older checkpoint) is behind: it waits to be healed.
  auto out = lh.join(2, 2, 2.5, /*committed=*/0, "h0");
  CHECK(find(out, conn_of(2, 0), "status")->message.text("action") == "heal");
  // The quorum goes without the joiner (a joiner contributes nothing to the average) and heals
  // it after its commit.
  lh.ready(0, 3, 3.0);
  out = lh.ready(1, 3, 3.0);
  const Outgoing* q = find(out, conn_of(0, 0), "quorum");
  REQUIRE(q != nullptr);
  CHECK(q->message.text("members") == "0,1");
  CHECK(q->message.text("heals") == "2<0");
  CHECK(q->message.text("ep.2") == "10.0.0.2:29500,10.0.0.2:29501");
  const Outgoing* heal = find(out, conn_of(2, 0), "heal");
  REQUIRE(heal != nullptr);
  CHECK(heal->message.integer("round") == 3);
  const int64_t id = q->message.integer("quorum");
  lh.result(0, id, true, 3.1);
  lh.result(1, id, true, 3.1);
  lh.state(0, 3, "h3", 3.2);
  lh.state(1, 3, "h3", 3.2);
  lh.state(2, 3, "h3", 3.3);  // healed: the same state
  // From the next round on it is a member: it computed a round of its own.
  lh.ready(0, 4, 4.0);
  lh.ready(1, 4, 4.0);
  out = lh.ready(2, 4, 4.0);
  q = find(out, conn_of(0, 0), "quorum");
  REQUIRE(q != nullptr);
  CHECK(q->message.text("members") == "0,1,2");
}

TEST_CASE("quorum: a joiner healed while the round waits for elastic.min_dcs makes the round",
          "[elastic]") {
  QuorumSettings s;
  s.min_dcs = 2;
  Lighthouse lh(s);
  lh.join(0, 1, 0.0);
  lh.join(1, 1, 0.0);
  lh.round({0, 1}, 1, 1.0, "h1");
  lh.rules.on_closed(conn_of(1, 0), 1.5);  // dc 1 dies
  auto out = lh.ready(0, 2, 2.0);
  CHECK(find(out, conn_of(0, 0), "quorum") == nullptr);  // one dc: short of min_dcs
  // dc 1 restarts from round 0: dc 0, waiting at the boundary, heals it at once.
  out = lh.join(1, 1, 3.0, 0, "h0", "restarted");
  REQUIRE(find(out, conn_of(1, 0), "status") != nullptr);
  REQUIRE(find(out, conn_of(0, 0), "serve") != nullptr);
  REQUIRE(find(out, conn_of(1, 0), "heal") != nullptr);
  lh.state(1, 1, "h1", 3.5);
  out = lh.ready(1, 2, 4.0);
  const Outgoing* q = find(out, conn_of(0, 0), "quorum");
  REQUIRE(q != nullptr);
  CHECK(q->message.text("members") == "0,1");
}

TEST_CASE("quorum: a dc whose state hash differs after a round is healed again", "[elastic]") {
  Lighthouse lh;
  for (int d = 0; d < 3; ++d)
    lh.join(d, 1, 0.0);
  std::vector<Outgoing> out;
  for (int d = 0; d < 3; ++d)
    out = lh.ready(d, 1, 1.0);
  const int64_t id = find(out, conn_of(0, 0), "quorum")->message.integer("quorum");
  for (int d = 0; d < 3; ++d)
    lh.result(d, id, true, 1.1);
  lh.state(0, 1, "good", 1.2);
  out = lh.state(1, 1, "bad", 1.2);
  CHECK(find(out, conn_of(1, 0), "status") == nullptr);  // not all have reported yet
  out = lh.state(2, 1, "good", 1.2);
  const Outgoing* status = find(out, conn_of(1, 0), "status");
  REQUIRE(status != nullptr);
  CHECK(status->message.text("action") == "heal");
  CHECK_THAT(status->message.text("reason"), Catch::Contains("differs"));
}

TEST_CASE("quorum: a dc of another run, or a second launch of a live dc, is refused", "[elastic]") {
  QuorumSettings s;
  s.heartbeat_timeout_s = 2.0;
  Lighthouse lh(s);
  lh.join(0, 1, 0.0);
  auto out = lh.rules.on_hello(conn_of(1, 0), hello(1, 0, 1, "x", 0, "h0", "llama"), 0.1);
  const Outgoing* refused = find(out, conn_of(1, 0), "refused");
  REQUIRE(refused != nullptr);
  CHECK(refused->close);
  CHECK_THAT(refused->message.text("reason"),
             Catch::Contains("model: this dc has llama, the run's dcs have tiny"));

  out = lh.rules.on_hello(conn_of(5, 0), hello(0, 0, 1, "another"), 0.5);
  REQUIRE(find(out, conn_of(5, 0), "refused") != nullptr);
  CHECK_THAT(find(out, conn_of(5, 0), "refused")->message.text("reason"),
             Catch::Contains("dc 0 is live"));
  // Once the old launch is silent past the timeout, a restart of dc 0 replaces it.
  out = lh.rules.on_hello(conn_of(5, 0), hello(0, 0, 1, "another"), 3.0);
  CHECK(find(out, conn_of(5, 0), "refused") == nullptr);
  CHECK(find(out, conn_of(0, 0), "dropped") != nullptr);
  CHECK(find(out, conn_of(5, 0), "status") != nullptr);
}

TEST_CASE("quorum: a restarted lighthouse rebuilds the run from the dcs' hellos", "[elastic]") {
  Lighthouse lh;
  // dc 1 committed round 5 before the old lighthouse went away; dc 0 had not heard of it.
  auto out = lh.join(0, 1, 0.0, 4, "h4");
  CHECK(find(out, conn_of(0, 0), "status")->message.text("action") == "train");
  out = lh.join(1, 1, 0.1, 5, "h5");
  CHECK(find(out, conn_of(1, 0), "status")->message.text("action") == "train");
  CHECK(lh.rules.committed_round() == 5);
  // dc 0 reaches the boundary of its round 5, which is gone: it is healed.
  out = lh.ready(0, 5, 1.0);
  REQUIRE(find(out, conn_of(0, 0), "status") != nullptr);
  CHECK(find(out, conn_of(0, 0), "status")->message.text("action") == "heal");
  out = lh.ready(1, 6, 2.0);
  const Outgoing* q = find(out, conn_of(1, 0), "quorum");
  REQUIRE(q != nullptr);
  CHECK(q->message.text("heals") == "0<1");
}

TEST_CASE("quorum: when every up-to-date dc left, the newest waiting one carries on", "[elastic]") {
  QuorumSettings s;
  s.heartbeat_timeout_s = 2.0;
  Lighthouse lh(s);
  lh.join(0, 1, 0.0);
  lh.round({0}, 1, 0.5, "h1");
  lh.join(1, 1, 0.6, 0, "h0");  // waits to be healed
  lh.rules.on_closed(conn_of(0, 0), 1.0);
  auto out = lh.rules.tick(1.1);
  const Outgoing* status = find(out, conn_of(1, 0), "status");
  REQUIRE(status != nullptr);
  CHECK(status->message.text("action") == "train");
  CHECK(lh.rules.committed_round() == 0);
}

TEST_CASE("quorum: a dc behind a finished run is refused, not left to carry it on alone",
          "[elastic]") {
  Lighthouse lh;
  lh.join(0, 1, 0.0);
  lh.join(1, 1, 0.0);
  lh.round({0, 1}, 1, 0.1, "h1");
  // dc 0 finishes at round 1 and goes; dc 1 follows.
  lh.rules.on_message(conn_of(0, 0), msg("finished", {{"round", "1"}}), 0.2);
  lh.rules.on_closed(conn_of(0, 0), 0.2);
  // A dc restarted from round 0 while dc 1 is still up waits to be healed by it ...
  auto out = lh.join(2, 1, 0.3, 0, "h0");
  const Outgoing* status = find(out, conn_of(2, 0), "status");
  REQUIRE(status != nullptr);
  CHECK(status->message.text("action") == "heal");
  // ... and once dc 1 is gone too, nobody is left to: it is refused, not promoted.
  lh.rules.on_message(conn_of(1, 0), msg("finished", {{"round", "1"}}), 0.4);
  lh.rules.on_closed(conn_of(1, 0), 0.4);
  out = lh.rules.tick(0.5);
  const Outgoing* refused = find(out, conn_of(2, 0), "refused");
  REQUIRE(refused != nullptr);
  CHECK_THAT(refused->message.text("reason"),
             Catch::Contains("the run finished at round 1 without dc 2"));
  CHECK(lh.rules.live_dcs().empty());
  // A dc that starts after the end, behind it, is refused at its hello.
  out = lh.join(3, 1, 0.6, 0, "h0");
  REQUIRE(find(out, conn_of(3, 0), "refused") != nullptr);
  // One at the finished round itself is not behind: it may train (to its own end).
  out = lh.join(4, 1, 0.7, 1, "h1");
  status = find(out, conn_of(4, 0), "status");
  REQUIRE(status != nullptr);
  CHECK(status->message.text("action") == "train");
}
