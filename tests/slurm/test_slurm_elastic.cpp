// The elastic mode under a real Slurm (docs/elastic.md, docs/multi-host.md): each dc its own job
// of the sbatch template (scripts/slurm/autoloco.sbatch) on its own node, the lighthouse on the
// lab's head node. One dc's job is requeued mid-run (scontrol requeue, as a preemption does):
// its next segment resumes its own run directory, rejoins the others, and the run ends as one.
#include <catch2/catch.hpp>

#include <string>

#include "../support/elastic_run.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "slurm_lab.hpp"

using autoloco::test::committed_round;
using autoloco::test::contains;
using autoloco::test::final_hash;
using autoloco::test::Lighthouse;
using autoloco::test::quorums;
using autoloco::test::read_text;
using autoloco::test::SlurmLab;

namespace {

// sbatch of the template for dc `dc` of the run: one node; returns the job id.
std::string submit_dc(const SlurmLab& lab, const std::string& dir, const Lighthouse& lighthouse,
                      int dc) {
  return autoloco::test::submit_template(lab, dir, "e" + std::to_string(dc), "--nodes=1",
                                         "configs/diloco.yaml" +
                                             autoloco::test::elastic_sets(dir, 200) +
                                             lighthouse.elastic_args(dc, 2, 2));
}

std::string job_logs(const std::string& dir, const SlurmLab& lab, const std::string& job0,
                     const std::string& job1) {
  return "--- e0\n" + read_text(dir + "/e0-" + job0 + ".out") + "--- e1\n" +
         read_text(dir + "/e1-" + job1 + ".out") + "--- lighthouse\n" +
         read_text(dir + "/lighthouse.log") + "--- slurm\n" + lab.diagnose("");
}

}  // namespace

TEST_CASE("slurm: one job per dc under a lighthouse, a requeued dc rejoins and the run ends as one",
          "[slurm][elastic]") {
  const autoloco::test::TempDir tmp("slurm-elastic");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  SlurmLab lab(2, "e");
  const autoloco::test::TestLimit limit;
  const Lighthouse lighthouse(dir, limit,
                              std::string(AUTOLOCO_SOURCE_DIR) + "/scripts/netlab.sh exec --name " +
                                  lab.name() + " head --",
                              "10.77.0.254", 29400);
  // 50 rounds; min_dcs 2 holds dc 0 at the boundary while dc 1 is away, so the requeue cannot
  // come too late for the run, and dc 1's second segment finds the run where it left it.
  const std::string job0 = submit_dc(lab, dir, lighthouse, 0);
  const std::string job1 = submit_dc(lab, dir, lighthouse, 1);
  const bool two =
      lab.wait([&] { return committed_round(dir, "e1") >= 2; }, [&] { return !lab.ended(job1); });
  if (!two) {
    INFO(job_logs(dir, lab, job0, job1));
    FAIL("dc 1's job ended, or the test's time ran out, before its second round");
  }
  CHECK(lab.exec("scontrol requeue " + job1).rc == 0);
  int requeues = 0;
  const bool done1 = lab.wait_done(job1, &requeues);
  const bool done0 = lab.wait_done(job0);
  INFO(job_logs(dir, lab, job0, job1));
  REQUIRE(done1);
  REQUIRE(done0);
  CHECK(lab.state(job0) == "COMPLETED");
  CHECK(lab.state(job1) == "COMPLETED");
  CHECK(requeues >= 1);
  CHECK(contains(read_text(dir + "/e1-" + job1 + ".out"), "segment 2"));
  const std::string lh = lighthouse.log();
  CHECK(contains(lh, "dc 1 left"));
  CHECK(lh.find("dc 1 joined at round") != lh.rfind("dc 1 joined at round"));
  const std::string hash = final_hash(dir, "e0");
  CHECK_FALSE(hash.empty());
  CHECK(final_hash(dir, "e1") == hash);
  // dc 0 committed every round, each with dc 1: it waited while dc 1's job was away.
  const std::map<int, std::string> q0 = quorums(dir, "e0");
  CHECK(q0.size() == 50);
  for (const auto& [round, members] : q0)
    CHECK(members == "0,1");
}
