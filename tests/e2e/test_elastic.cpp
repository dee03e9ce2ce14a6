// The elastic mode end to end on loopback (docs/elastic.md): a lighthouse and each dc its own
// mpirun. Two dcs train bit for bit what one job of both trains; a dc killed mid-round leaves
// the others training every round; a dc restarted with --resume auto is healed and ends with the
// others' state; a dc frozen inside the all-reduce is dropped and, thawed, joins again. The
// timeouts are generous (deaths here are closed connections, seen at once) except the frozen
// dc's heartbeat timeout, which is what that test is about; the tests wait for events, and
// min_dcs keeps the survivors from running ahead where an outcome would depend on speed.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "../support/child_process.hpp"
#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "../support/wait.hpp"

using autoloco::test::ChildProcess;
using autoloco::test::contains;
using autoloco::test::read_lines;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::TestLimit;

namespace {

// The tiny model of the fault tests: 1 layer, H = 4, 24 steps, a checkpoint every 8.
std::string train_args(const std::string& dir, const std::string& name) {
  return std::string(AUTOLOCO_TRAIN_EXE) + " " + AUTOLOCO_SOURCE_DIR + "/configs/diloco.yaml" +
         " --set model.n_layer=1 --set model.d_model=32 --set model.n_head=2"
         " --set model.seq_len=32 --set run.eval_every=0 --set run.log_every=4"
         " --set inner.warmup_steps=2 --set data.batch_size=2 --set interval.H=4"
         " --set run.threads=1 --set ckpt.every_steps=8 --set run.steps=24"
         " --set data.train=" +
         dir + "/data/train_*.bin --set data.val=" + dir +
         "/data/val_*.bin --set run.out_dir=" + dir + "/runs --set run.name=" + name;
}

std::string mpirun(int ranks) {
  return std::string(AUTOLOCO_MPIEXEC) + " -n " + std::to_string(ranks) +
         " --oversubscribe --allow-run-as-root --bind-to none ";
}

// A lighthouse on a free loopback port, with a new key in `dir`.
class Lighthouse {
 public:
  explicit Lighthouse(const std::string& dir, const TestLimit& limit) : dir_(dir) {
    REQUIRE(run_command(std::string(AUTOLOCO_LIGHTHOUSE_EXE) + " --make-key " + key() +
                        " > /dev/null") == 0);
    process_ = std::make_unique<ChildProcess>(
        std::string(AUTOLOCO_LIGHTHOUSE_EXE) + " --host 127.0.0.1 --port 0 --key-file " + key(),
        log_path());
    const std::regex listening("listening on 127\\.0\\.0\\.1:([0-9]+)");
    std::string log;
    autoloco::test::wait_until(
        [&] {
          log = read_text(log_path());
          return std::regex_search(log, listening);
        },
        [&] { return process_->running() && limit.time_left(); });
    INFO(log);
    std::smatch m;
    REQUIRE(std::regex_search(log, m, listening));
    port_ = m[1].str();
  }
  ~Lighthouse() {
    process_->signal(SIGTERM);
    process_->wait();
  }

  std::string key() const { return dir_ + "/key"; }
  std::string log_path() const { return dir_ + "/lighthouse.log"; }
  std::string log() const { return read_text(log_path()); }
  bool running() { return process_->running(); }

  // autoloco-train's settings for dc `dc` of `dcs`, at least `min_dcs` in every round.
  std::string elastic_args(int dc, int dcs, int min_dcs) const {
    return " --set elastic.lighthouse=127.0.0.1:" + port_ + " --set elastic.key_file=" + key() +
           " --set elastic.dc=" + std::to_string(dc) + " --set elastic.dcs=" + std::to_string(dcs) +
           " --set elastic.min_dcs=" + std::to_string(min_dcs) +
           " --set elastic.heartbeat_timeout_s=60 --set elastic.collective_timeout_s=120"
           " --set elastic.round_deadline_s=300 --set elastic.quorum_timeout_s=500";
  }

 private:
  std::string dir_;
  std::string port_;
  std::unique_ptr<ChildProcess> process_;
};

// One dc's launch, with the variables of `env` ("NAME=VALUE ...") set for it.
std::unique_ptr<ChildProcess> start_dc(const std::string& dir, const Lighthouse& lighthouse, int dc,
                                       int dcs, int min_dcs, const std::string& env = "",
                                       const std::string& extra = "") {
  const std::string name = "e" + std::to_string(dc);
  return std::make_unique<ChildProcess>("env " + env + " " + mpirun(1) + train_args(dir, name) +
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

// Waits for each dc's job to end (bounded by the test's time) and returns their exit codes.
std::vector<int> wait_all(std::vector<std::unique_ptr<ChildProcess>>& dcs, const TestLimit& limit) {
  std::vector<int> codes;
  for (auto& dc : dcs) {
    autoloco::test::wait_until([&] { return !dc->running(); }, [&] { return limit.time_left(); });
    codes.push_back(dc->running() ? -1 : dc->wait());
  }
  return codes;
}

std::string summary(const std::string& dir, const std::string& name) {
  return read_text(dir + "/runs/" + name + "/summary.json");
}

std::string string_field(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\":\"([^\"]*)\"");
  return std::regex_search(json, m, re) ? m[1].str() : std::string();
}

// The raw text of a number in flat JSON, for comparisons bit for bit.
std::string number_text(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\":(-?[0-9.eE+-]+)");
  return std::regex_search(json, m, re) ? m[1].str() : std::string();
}

// The dcs of each round a dc committed (its syncs.jsonl), by round.
std::map<int, std::string> quorums(const std::string& dir, const std::string& name) {
  std::map<int, std::string> out;
  const std::regex re("\"round\":([0-9]+),.*\"quorum_dcs\":\\[([0-9,]*)\\]");
  for (const std::string& line : read_lines(dir + "/runs/" + name + "/syncs.jsonl")) {
    std::smatch m;
    if (std::regex_search(line, m, re)) out[std::stoi(m[1].str())] = m[2].str();
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

std::string logs(const std::string& dir, const std::vector<std::string>& names) {
  std::string all;
  for (const auto& n : names)
    all += "--- " + n + "\n" + read_text(dir + "/" + n + ".log");
  return all;
}

}  // namespace

TEST_CASE("e2e: two dcs as separate launches under a lighthouse train bit for bit one job's run",
          "[e2e][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-elastic-same");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  REQUIRE(run_command(mpirun(2) + train_args(dir, "onejob") + " > " + dir + "/onejob.log 2>&1") ==
          0);
  Lighthouse lighthouse(dir, limit);
  std::vector<std::unique_ptr<ChildProcess>> dcs = start_run(dir, lighthouse, 2, 2);
  const std::vector<int> codes = wait_all(dcs, limit);
  INFO(logs(dir, {"onejob", "e0", "e1", "lighthouse"}));
  CHECK(codes == std::vector<int>{0, 0});
  const std::string one = summary(dir, "onejob");
  for (const std::string name : {"e0", "e1"}) {
    const std::string s = summary(dir, name);
    CHECK(number_text(s, "final_eval_loss") == number_text(one, "final_eval_loss"));
    CHECK(number_text(s, "rounds") == "6");
    CHECK(quorums(dir, name) == every_round("0,1"));
  }
  CHECK_FALSE(string_field(summary(dir, "e0"), "state_hash").empty());
  CHECK(string_field(summary(dir, "e0"), "state_hash") ==
        string_field(summary(dir, "e1"), "state_hash"));
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
  CHECK(string_field(summary(dir, "e0"), "state_hash") ==
        string_field(summary(dir, "e1"), "state_hash"));
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
  const std::string hash = string_field(summary(dir, "e0"), "state_hash");
  CHECK_FALSE(hash.empty());
  CHECK(string_field(summary(dir, "e1"), "state_hash") == hash);
  CHECK(string_field(summary(dir, "e2"), "state_hash") == hash);
  for (const std::string name : {"e0", "e1"})
    CHECK(quorums(dir, name) == every_round("0,1,2"));
  CHECK(lighthouse.running());
}

TEST_CASE(
    "e2e: a dc frozen inside the all-reduce is dropped; thawed, it joins again and the "
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
  const std::string hash = string_field(summary(dir, "e0"), "state_hash");
  CHECK_FALSE(hash.empty());
  CHECK(string_field(summary(dir, "e1"), "state_hash") == hash);
  CHECK(string_field(summary(dir, "e2"), "state_hash") == hash);
  // No round was lost: round 3 was redone by all three once dc 2 was back.
  for (const std::string name : {"e0", "e1", "e2"})
    CHECK(quorums(dir, name) == every_round("0,1,2"));
}
