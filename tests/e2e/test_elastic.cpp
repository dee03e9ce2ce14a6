// The elastic mode end to end on loopback (docs/elastic.md): a lighthouse and each dc its own
// mpirun. Two dcs train bit for bit what one job of both trains; a dc killed mid-round leaves
// the others training every round; a dc restarted with --resume auto is healed and ends with the
// others' state, also with a 4-bit wire, AutoLoCo's controller and Muon; a dc frozen inside the
// all-reduce is dropped and, thawed, joins again; a lighthouse killed and started again costs
// no round. The timeouts are generous (deaths here are closed connections, seen at once) except
// the frozen dc's heartbeat timeout, which is what that test is about; the tests wait for
// events, and min_dcs keeps the survivors from running ahead where an outcome would depend on
// speed.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../support/elastic_run.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::ChildProcess;
using autoloco::test::contains;
using autoloco::test::final_hash;
using autoloco::test::Lighthouse;
using autoloco::test::logs;
using autoloco::test::number_text;
using autoloco::test::quorums;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::TestLimit;
using autoloco::test::wait_all;

namespace {

std::string summary(const std::string& dir, const std::string& name) {
  return autoloco::test::run_summary(dir, name);
}

// One dc's launch, with the variables of `env` ("NAME=VALUE ...") set for it.
std::unique_ptr<ChildProcess> start_dc(const std::string& dir, const Lighthouse& lighthouse, int dc,
                                       int dcs, int min_dcs, const std::string& env = "",
                                       const std::string& extra = "") {
  const std::string name = "e" + std::to_string(dc);
  return std::make_unique<ChildProcess>("env " + env + " " + autoloco::test::mpirun_args(1) +
                                            autoloco::test::elastic_train_args(dir, name) +
                                            lighthouse.elastic_args(dc, dcs, min_dcs) + " " + extra,
                                        dir + "/" + name + ".log");
}

// Every dc of a run of `dcs`; the last one with AUTOLOCO_FAULT=`fault` when given.
std::vector<std::unique_ptr<ChildProcess>> start_run(const std::string& dir,
                                                     const Lighthouse& lighthouse, int dcs,
                                                     int min_dcs, const std::string& fault = "") {
  std::vector<std::unique_ptr<ChildProcess>> out;
  for (int dc = 0; dc < dcs; ++dc) {
    const bool faulty = dc == dcs - 1 && !fault.empty();
    out.push_back(start_dc(dir, lighthouse, dc, dcs, min_dcs,
                           faulty ? "AUTOLOCO_FAULT=" + fault : std::string()));
  }
  return out;
}

// Rounds 1 to 6, each committed by `dcs`.
std::map<int, std::string> every_round(const std::string& dcs) {
  std::map<int, std::string> out;
  for (int r = 1; r <= 6; ++r)
    out[r] = dcs;
  return out;
}

// Whether a child of process `pid` (the rank that an mpirun started) is stopped (SIGSTOP).
bool child_stopped(int pid) {
  const std::string children =
      read_text("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::istringstream in(children);
  for (int child = 0; in >> child;) {
    const std::string stat = read_text("/proc/" + std::to_string(child) + "/stat");
    const size_t close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T') {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "e2e: two dcs as separate launches under a lighthouse train bit for bit one job's run, "
    "and a launch without the key is refused without disturbing it",
    "[e2e][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-elastic-same");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  REQUIRE(run_command(autoloco::test::mpirun_args(2) +
                      autoloco::test::elastic_train_args(dir, "onejob") + " > " + dir +
                      "/onejob.log 2>&1") == 0);
  Lighthouse lighthouse(dir, limit);
  // dc 0 joins and waits for dc 1 (min_dcs 2); meanwhile a launch posing as dc 1 with another
  // key tries to join the run, and only once the lighthouse has refused it does dc 1 start.
  std::vector<std::unique_ptr<ChildProcess>> dcs;
  dcs.push_back(start_dc(dir, lighthouse, 0, 2, 2));
  const std::string wrong = dir + "/wrong.key";
  REQUIRE(run_command(std::string(AUTOLOCO_LIGHTHOUSE_EXE) + " --make-key " + wrong +
                      " > /dev/null") == 0);
  ChildProcess intruder(autoloco::test::mpirun_args(1) +
                            autoloco::test::elastic_train_args(dir, "intruder") +
                            lighthouse.elastic_args(1, 2, 2) + " --set elastic.key_file=" + wrong,
                        dir + "/intruder.log");
  const bool refused =
      autoloco::test::wait_until([&] { return contains(lighthouse.log(), "wrong key"); },
                                 [&] { return intruder.running() && limit.time_left(); });
  {
    INFO(logs(dir, {"e0", "intruder", "lighthouse"}));
    REQUIRE(refused);
    autoloco::test::wait_until([&] { return !intruder.running(); },
                               [&] { return limit.time_left(); });
    CHECK(intruder.wait() != 0);
  }
  dcs.push_back(start_dc(dir, lighthouse, 1, 2, 2));
  const std::vector<int> codes = wait_all(dcs, limit);
  INFO(logs(dir, {"onejob", "e0", "e1", "intruder", "lighthouse"}));
  CHECK(codes == std::vector<int>{0, 0});
  const std::string one = summary(dir, "onejob");
  for (const std::string name : {"e0", "e1"}) {
    const std::string s = summary(dir, name);
    CHECK(number_text(s, "final_eval_loss") == number_text(one, "final_eval_loss"));
    CHECK(number_text(s, "rounds") == "6");
    CHECK(quorums(dir, name) == every_round("0,1"));
  }
  CHECK_FALSE(final_hash(dir, "e0").empty());
  CHECK(final_hash(dir, "e0") == final_hash(dir, "e1"));
  CHECK(contains(lighthouse.log(), "round 6 committed by dcs 0,1"));
}

TEST_CASE("e2e: a dc killed mid-round leaves the other dcs training every round to the end",
          "[e2e][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-elastic-leave");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  Lighthouse lighthouse(dir, limit);
  // dc 2 dies at the start of step 15, in round 4 (steps 13-16), never reaching its boundary.
  // It starts first and dc 1 second, so that both train from round 0 (with min_dcs 2 they wait
  // for each other); dc 0, started last, may be healed into a round already under way.
  std::vector<std::unique_ptr<ChildProcess>> dcs(3);
  for (const int dc : {2, 1, 0}) {
    dcs[static_cast<size_t>(dc)] =
        start_dc(dir, lighthouse, dc, 3, 2, dc == 2 ? "AUTOLOCO_FAULT=kill:rank=0:step=15" : "");
    const std::string joined = "dc " + std::to_string(dc) + " joined";
    autoloco::test::wait_until([&] { return contains(lighthouse.log(), joined); },
                               [&] { return dcs[static_cast<size_t>(dc)]->running(); });
  }
  const std::vector<int> codes = wait_all(dcs, limit);
  INFO(logs(dir, {"e0", "e1", "e2", "lighthouse"}));
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
  CHECK(codes[2] != 0);
  CHECK(contains(read_text(dir + "/e2.log"), "AUTOLOCO_FAULT"));
  CHECK(contains(lighthouse.log(), "dc 2 left"));
  // No survivor lost a round: dc 1 committed all 6, rounds 1-3 with dc 2, rounds 4-6 without.
  const std::map<int, std::string> q1 = quorums(dir, "e1");
  REQUIRE(q1.size() == 6);
  for (int r = 1; r <= 3; ++r)
    CHECK(contains(q1.at(r), "1,2"));
  const std::map<int, std::string> q0 = quorums(dir, "e0");
  for (int r = 4; r <= 6; ++r) {
    CHECK(q1.at(r) == "0,1");
    CHECK((q0.count(r) == 1 && q0.at(r) == "0,1"));
  }
  CHECK(final_hash(dir, "e0") == final_hash(dir, "e1"));
}

TEST_CASE("e2e: a killed dc restarted with --resume auto is healed and ends with the others' state",
          "[e2e][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-elastic-heal");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  Lighthouse lighthouse(dir, limit);
  // min_dcs 3: the survivors wait at round 4's boundary for the restarted dc, so the test needs
  // no race against their training. dc 2's newest checkpoint is step 8, behind round 3's commit.
  std::vector<std::unique_ptr<ChildProcess>> dcs =
      start_run(dir, lighthouse, 3, 3, "kill:rank=0:step=15");
  autoloco::test::wait_until([&] { return !dcs[2]->running(); }, [&] { return limit.time_left(); });
  const int killed = dcs[2]->running() ? -1 : dcs[2]->wait();
  {
    INFO(logs(dir, {"e2", "lighthouse"}));
    REQUIRE(killed != 0);
    REQUIRE(killed != -1);
  }
  std::rename((dir + "/e2.log").c_str(), (dir + "/e2-killed.log").c_str());
  dcs[2] = start_dc(dir, lighthouse, 2, 3, 3, "", "--resume auto");
  const std::vector<int> codes = wait_all(dcs, limit);
  INFO(logs(dir, {"e0", "e1", "e2-killed", "e2", "lighthouse"}));
  CHECK(codes == std::vector<int>{0, 0, 0});
  const std::string restarted = read_text(dir + "/e2.log");
  CHECK(contains(restarted, "(to be healed)"));
  CHECK(contains(restarted, "dc 2: healed from dc "));
  const std::string hash = final_hash(dir, "e0");
  CHECK_FALSE(hash.empty());
  CHECK(final_hash(dir, "e1") == hash);
  CHECK(final_hash(dir, "e2") == hash);
  for (const std::string name : {"e0", "e1"})
    CHECK(quorums(dir, name) == every_round("0,1,2"));
  CHECK(lighthouse.running());
}

TEST_CASE(
    "e2e: a dc frozen inside the all-reduce is dropped, and thawed it joins again and the "
    "run ends as one",
    "[e2e][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-elastic-frozen");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  Lighthouse lighthouse(dir, limit);
  // dc 2 stops itself as its all-reduce of round 3 starts, its connections open: the others are
  // woken when the lighthouse stops hearing it (the heartbeat timeout, 3 s by default), and
  // min_dcs 3 keeps them at the boundary until it is back, so nothing races the clock here.
  const std::string freeze = "--set elastic.heartbeat_timeout_s=3";
  std::vector<std::unique_ptr<ChildProcess>> dcs;
  for (int dc = 0; dc < 3; ++dc) {
    dcs.push_back(start_dc(dir, lighthouse, dc, 3, 3,
                           dc == 2 ? "AUTOLOCO_FAULT=stop-sync:dc=2:round=3" : "", freeze));
  }
  autoloco::test::wait_until([&] { return contains(lighthouse.log(), "dc 2 left"); },
                             [&] { return dcs[0]->running() && limit.time_left(); });
  {
    INFO(logs(dir, {"e0", "e2", "lighthouse"}));
    REQUIRE(contains(lighthouse.log(), "dc 2 left: member 0 silent for"));
    REQUIRE(contains(lighthouse.log(), "(round 3) called off"));
  }
  dcs[2]->signal(SIGCONT);
  const std::vector<int> codes = wait_all(dcs, limit);
  INFO(logs(dir, {"e0", "e1", "e2", "lighthouse"}));
  CHECK(codes == std::vector<int>{0, 0, 0});
  // Back in the run: the lighthouse saw dc 2 join a second time.
  const std::string lh = lighthouse.log();
  CHECK(lh.find("dc 2 joined at round") != lh.rfind("dc 2 joined at round"));
  const std::string hash = final_hash(dir, "e0");
  CHECK_FALSE(hash.empty());
  CHECK(final_hash(dir, "e1") == hash);
  CHECK(final_hash(dir, "e2") == hash);
  // No round was lost: round 3 was redone by all three once dc 2 was back.
  for (const std::string name : {"e0", "e1", "e2"})
    CHECK(quorums(dir, name) == every_round("0,1,2"));
}

TEST_CASE(
    "e2e: a 4-bit wire with error feedback, AutoLoCo's controller and Muon carry across a heal",
    "[e2e][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-elastic-carry");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  Lighthouse lighthouse(dir, limit);
  // The state a heal must carry beyond plain DiLoCo's: the adaptive interval (H moves from
  // round to round), and a compressed wire whose residual a called-off round gives back. Muon
  // is the inner step, each dc's own. min_dcs 2 keeps dc 0 at the boundary for dc 1's return.
  const std::string carry =
      "--set outer.wire_dtype=int4 --set outer.error_feedback=true"
      " --set interval.controller=autoloco --set interval.H_min=2 --set interval.H_max=8"
      " --set inner.optimizer=muon";
  std::vector<std::unique_ptr<ChildProcess>> dcs;
  dcs.push_back(start_dc(dir, lighthouse, 0, 2, 2, "", carry));
  dcs.push_back(start_dc(dir, lighthouse, 1, 2, 2, "AUTOLOCO_FAULT=kill:rank=0:step=15", carry));
  autoloco::test::wait_until([&] { return !dcs[1]->running(); }, [&] { return limit.time_left(); });
  const int killed = dcs[1]->running() ? -1 : dcs[1]->wait();
  {
    INFO(logs(dir, {"e1", "lighthouse"}));
    REQUIRE(killed != 0);
    REQUIRE(killed != -1);
  }
  std::rename((dir + "/e1.log").c_str(), (dir + "/e1-killed.log").c_str());
  dcs[1] = start_dc(dir, lighthouse, 1, 2, 2, "", carry + " --resume auto");
  const std::vector<int> codes = wait_all(dcs, limit);
  INFO(logs(dir, {"e0", "e1-killed", "e1", "lighthouse"}));
  CHECK(codes == std::vector<int>{0, 0});
  CHECK(contains(read_text(dir + "/e1.log"), "dc 1: healed from dc 0"));
  const std::string hash = final_hash(dir, "e0");
  CHECK_FALSE(hash.empty());
  CHECK(final_hash(dir, "e1") == hash);
  CHECK(number_text(summary(dir, "e1"), "rounds") == number_text(summary(dir, "e0"), "rounds"));
  // Every round dc 0 committed was committed by both: none without the other, none lost.
  const std::map<int, std::string> q0 = quorums(dir, "e0");
  REQUIRE_FALSE(q0.empty());
  CHECK(q0.size() == static_cast<size_t>(std::stoi(number_text(summary(dir, "e0"), "rounds"))));
  for (const auto& [round, members] : q0)
    CHECK(members == "0,1");
}

TEST_CASE("e2e: a lighthouse killed mid-run and started again costs a round, not the run",
          "[e2e][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-elastic-lighthouse");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  Lighthouse lighthouse(dir, limit);
  // 12 rounds, min_dcs 2. dc 1 stops itself in round 5 (SIGSTOP; the heartbeat timeout is a
  // minute), so dc 0 waits at round 5's boundary while the lighthouse is killed and started
  // again: nothing here races the run's speed. The new lighthouse keeps no state of its own and
  // rebuilds the run from the dcs' hellos; dc 1, continued, finds it too.
  std::vector<std::unique_ptr<ChildProcess>> dcs;
  for (int dc = 0; dc < 2; ++dc) {
    const std::string name = "e" + std::to_string(dc);
    dcs.push_back(std::make_unique<ChildProcess>(
        std::string(dc == 1 ? "env AUTOLOCO_FAULT=stop:rank=0:step=18 " : "") +
            autoloco::test::mpirun_args(1) + autoloco::test::elastic_train_args(dir, name, 48) +
            lighthouse.elastic_args(dc, 2, 2),
        dir + "/" + name + ".log"));
  }
  const bool stopped = autoloco::test::wait_until(
      [&] {
        return autoloco::test::committed_round(dir, "e0") >= 4 && child_stopped(dcs[1]->pid());
      },
      [&] { return dcs[0]->running() && dcs[1]->running() && limit.time_left(); });
  {
    INFO(logs(dir, {"e0", "e1", "lighthouse"}));
    REQUIRE(stopped);
  }
  lighthouse.kill_and_restart(limit);
  dcs[1]->signal(SIGCONT);
  const std::vector<int> codes = wait_all(dcs, limit);
  INFO(logs(dir, {"e0", "e1", "lighthouse", "lighthouse-1"}));
  CHECK(codes == std::vector<int>{0, 0});
  // The new lighthouse took the run over from the dcs and saw it to the end.
  CHECK(contains(lighthouse.log(), "round 12 committed by dcs 0,1"));
  const std::string hash = final_hash(dir, "e0");
  CHECK_FALSE(hash.empty());
  CHECK(final_hash(dir, "e1") == hash);
  const std::map<int, std::string> q0 = quorums(dir, "e0");
  CHECK(q0.size() == 12);
  for (const auto& [round, members] : q0)
    CHECK(members == "0,1");
}
