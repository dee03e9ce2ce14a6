// The elastic mode across the network lab's hosts (docs/elastic.md, docs/multi-host.md): the
// lighthouse on the lab's head node, each dc its own mpirun on its own host, the links shaped.
// One dc is killed mid-round and brought back (--resume auto, as a requeue would), another is
// cut off from the lab and mended; the run ends as one, no round committed without a dc.
#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../support/elastic_run.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::ChildProcess;
using autoloco::test::committed_round;
using autoloco::test::contains;
using autoloco::test::final_hash;
using autoloco::test::Lighthouse;
using autoloco::test::logs;
using autoloco::test::quorums;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::TestLimit;
using autoloco::test::wait_until;

namespace {

const std::string kNetlab = std::string(AUTOLOCO_SOURCE_DIR) + "/scripts/netlab.sh";

// A lab of its own for the test, taken down however the test ends.
class Lab {
 public:
  Lab(const std::string& name, int hosts, const std::string& rate) : name_(name) {
    REQUIRE(run_command(kNetlab + " up " + std::to_string(hosts) + " --rate " + rate + " --name " +
                        name_ + " > /dev/null") == 0);
  }
  ~Lab() { run_command(kNetlab + " down --name " + name_ + " > /dev/null 2>&1"); }
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  // A prefix that runs a command on `host` (head, h0, ...); netlab execs it, so the pid the test
  // follows is the command's.
  std::string on(const std::string& host) const {
    return kNetlab + " exec --name " + name_ + " " + host + " --";
  }
  int link(const std::string& verb, const std::string& host) const {
    return run_command(kNetlab + " " + verb + " --name " + name_ + " " + host);
  }

 private:
  std::string name_;
};

}  // namespace

TEST_CASE(
    "net: elastic dcs on lab hosts: one killed and brought back, one cut off and mended, the run "
    "ends as one",
    "[net][elastic]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("net-elastic");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const Lab lab("nlelastic", 3, "100mbit");
  Lighthouse lighthouse(dir, limit, lab.on("head"), "10.77.0.254", 29400);
  // 12 rounds. min_dcs 3: no round commits without every dc, so the survivors wait at a boundary
  // for the one that is gone and nothing here races their training. A cut link is silent: the
  // lighthouse finds it by its heartbeat, 5 s here (generous for a loaded machine).
  const auto start = [&](int dc, const std::string& env, const std::string& extra) {
    const std::string name = "e" + std::to_string(dc);
    return std::make_unique<ChildProcess>(
        lab.on("h" + std::to_string(dc)) + " env OMP_NUM_THREADS=1 " + env + " " +
            autoloco::test::mpirun_args(1) + autoloco::test::elastic_train_args(dir, name, 48) +
            lighthouse.elastic_args(dc, 3, 3) + " --set elastic.heartbeat_timeout_s=5 " + extra,
        dir + "/" + name + ".log");
  };
  std::vector<std::unique_ptr<ChildProcess>> dcs;
  for (int dc = 0; dc < 3; ++dc)
    dcs.push_back(start(dc, dc == 2 ? "AUTOLOCO_FAULT=kill:rank=0:step=15" : "", ""));

  // dc 2 dies in round 4 and comes back behind the others' commits: it is healed.
  wait_until([&] { return !dcs[2]->running(); }, [&] { return limit.time_left(); });
  const int killed = dcs[2]->running() ? -1 : dcs[2]->wait();
  {
    INFO(logs(dir, {"e2", "lighthouse"}));
    REQUIRE(killed != 0);
    REQUIRE(killed != -1);
  }
  std::rename((dir + "/e2.log").c_str(), (dir + "/e2-killed.log").c_str());
  dcs[2] = start(2, "", "--resume auto");

  // Once round 5 is committed by all three, dc 1's link goes down: it is at most at round 6's
  // boundary then, which the others cannot pass without it.
  const bool five = wait_until([&] { return committed_round(dir, "e0") >= 5; },
                               [&] { return dcs[0]->running() && limit.time_left(); });
  {
    INFO(logs(dir, {"e0", "e1", "e2", "lighthouse"}));
    REQUIRE(five);
  }
  REQUIRE(lab.link("cut", "h1") == 0);
  const bool left = wait_until([&] { return contains(lighthouse.log(), "dc 1 left"); },
                               [&] { return dcs[0]->running() && limit.time_left(); });
  REQUIRE(lab.link("mend", "h1") == 0);
  {
    INFO(logs(dir, {"e0", "e1", "lighthouse"}));
    REQUIRE(left);
  }

  const std::vector<int> codes = autoloco::test::wait_all(dcs, limit);
  INFO(logs(dir, {"e0", "e1", "e2-killed", "e2", "lighthouse"}));
  CHECK(codes == std::vector<int>{0, 0, 0});
  const std::string lh = lighthouse.log();
  CHECK(contains(lh, "dc 2 left"));
  CHECK(contains(read_text(dir + "/e2.log"), "dc 2: healed from dc "));
  // dc 1 came back to the run after the mend: the lighthouse saw it join a second time.
  CHECK(lh.find("dc 1 joined at round") != lh.rfind("dc 1 joined at round"));
  const std::string hash = final_hash(dir, "e0");
  CHECK_FALSE(hash.empty());
  CHECK(final_hash(dir, "e1") == hash);
  CHECK(final_hash(dir, "e2") == hash);
  // Every round was committed, and by all three dcs: none lost, none without a dc.
  const std::map<int, std::string> q0 = quorums(dir, "e0");
  CHECK(q0.size() == 12);
  for (const auto& [round, members] : q0)
    CHECK(members == "0,1,2");
}
