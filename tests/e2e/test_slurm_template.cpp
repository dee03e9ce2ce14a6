// scripts/slurm/autoloco.sbatch's own logic, without Slurm: a fake srun (mpirun with the task
// count asked for) and a fake scontrol (it records the requeue) on PATH, and the SLURM_*
// variables of each segment set by hand. A run of 2 dcs goes on in a smaller allocation with
// the one dc that fits, then on 2 dcs again, where the watchdog ends a hung segment and the
// template requeues it. tests labelled slurm (issue 22) run the template under a real Slurm.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::contains;
using autoloco::test::read_text;
namespace fs = std::filesystem;

namespace {

void write_script(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  fs::permissions(path, fs::perms::owner_all);
}

// srun [options] PROGRAM ARGS...: runs PROGRAM on --ntasks tasks under mpirun.
void fake_slurm(const std::string& bin) {
  fs::create_directories(bin);
  write_script(bin + "/srun", std::string("#!/bin/bash\nn=1\n") +
                                  "[[ $1 == --mpi=list ]] && { echo 'MPI plugin types are...'; "
                                  "printf '\\tnone\\n\\tpmix\\n'; exit 0; }\n" +
                                  "while [[ $1 == -* ]]; do\n"
                                  "  case $1 in --ntasks=*) n=${1#--ntasks=} ;; esac\n"
                                  "  shift\ndone\n"
                                  "exec " +
                                  AUTOLOCO_MPIEXEC +
                                  " -n \"$n\" --oversubscribe --allow-run-as-root --bind-to none "
                                  "\"$@\"\n");
  write_script(bin + "/scontrol", "#!/bin/bash\necho \"$*\" >> \"$FAKE_SLURM_LOG\"\n");
}

struct Segment {
  int rc = -1;
  std::string log;
};

Segment run_segment(const std::string& dir, int tasks, int restarts, int64_t steps,
                    const std::string& env) {
  const std::string log = dir + "/segment" + std::to_string(restarts) + ".log";
  const std::string command =
      "cd " + dir + " && PATH=" + dir + "/bin:$PATH FAKE_SLURM_LOG=" + dir +
      "/scontrol.log SLURM_JOB_ID=77 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS=" + std::to_string(tasks) +
      " SLURM_RESTART_COUNT=" + std::to_string(restarts) +
      " OMP_NUM_THREADS=1 TRAIN=" + AUTOLOCO_TRAIN_EXE + " REPO=" + AUTOLOCO_SOURCE_DIR + " " +
      env + " bash " + AUTOLOCO_SOURCE_DIR + "/scripts/slurm/autoloco.sbatch configs/diloco.yaml" +
      " --set topology.ranks_per_dc=2 --set model.n_layer=1 --set model.d_model=32"
      " --set model.n_head=2 --set model.seq_len=32 --set run.eval_every=0 --set run.log_every=4"
      " --set inner.warmup_steps=2 --set data.batch_size=2 --set interval.H=4"
      " --set run.threads=1 --set ckpt.every_steps=4 --set comm.timeout_s=3 --set data.train=" +
      dir + "/data/train_*.bin --set data.val=" + dir + "/data/val_*.bin --set run.out_dir=" + dir +
      "/runs --set run.name=elastic --set run.steps=" + std::to_string(steps) + " > " + log +
      " 2>&1";
  Segment s;
  s.rc = autoloco::test::run_command(command);
  s.log = read_text(log);
  return s;
}

}  // namespace

TEST_CASE("e2e: the sbatch template resumes with the dcs that fit and requeues a hung segment",
          "[e2e][slurm-template]") {
  const autoloco::test::TempDir tmp("e2e-sbatch-elastic");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  fake_slurm(dir + "/bin");
  const std::string summary = dir + "/runs/elastic/summary.json";

  const Segment first = run_segment(dir, 4, 0, 8, "");
  INFO(first.log);
  REQUIRE(first.rc == 0);
  CHECK(contains(first.log, "allocation: 2 nodes, 4 tasks = 2 dc(s) of 2 ranks"));
  CHECK(contains(first.log, "the run finished"));
  CHECK(contains(first.log, "srun: --mpi=pmix"));

  // A node is gone: 3 tasks hold one dc of 2.
  const Segment second = run_segment(dir, 3, 1, 16, "");
  INFO(second.log);
  REQUIRE(second.rc == 0);
  CHECK(contains(second.log, "1 of the allocation's 3 tasks stay idle: not a whole dc"));
  CHECK(contains(second.log, "2 tasks = 1 dc(s) of 2 ranks"));
  CHECK(contains(second.log, "resume: topology changed, 2 dcs -> 1: dc 0 <- 0; dc 1 dropped"));
  CHECK(contains(read_text(summary), R"("topology_change":{"from_dcs":2,"to_dcs":1)"));
  CHECK(contains(read_text(summary), R"("steps":16)"));
  // The job and segment in the start log and the summary, and every start in segments.jsonl.
  CHECK(contains(second.log, "slurm job 77, segment 1 (requeued once)"));
  CHECK(contains(read_text(summary), R"("slurm":{"job_id":"77","segment":1,)"));
  const auto segments = autoloco::test::read_lines(dir + "/runs/elastic/segments.jsonl");
  REQUIRE(segments.size() == 2);
  CHECK(contains(segments[0], R"("start_step":0,)"));
  CHECK(contains(segments[0], R"("num_dcs":2,)"));
  CHECK(contains(segments[0], R"("slurm":{"job_id":"77","segment":0,)"));
  CHECK(contains(segments[1], R"("start_step":8,)"));
  CHECK(contains(segments[1], R"("num_dcs":1,)"));
  CHECK(contains(segments[1], R"("slurm":{"job_id":"77","segment":1,)"));

  // Back on 2 dcs, a rank hangs: the watchdog ends the segment (124) and the job is requeued.
  const Segment third = run_segment(dir, 4, 2, 24, "AUTOLOCO_FAULT=stop:rank=3:step=19");
  INFO(third.log);
  CHECK(third.rc == 0);
  CHECK(contains(third.log,
                 "resume: topology changed, 1 dc -> 2: dc 0 <- 0, dc 1 <- 0 (fresh data)"));
  CHECK(contains(third.log, "has waited"));
  CHECK(contains(third.log, "requeueing job 77"));
  CHECK(read_text(dir + "/scontrol.log") == "requeue 77\n");
  CHECK(autoloco::test::read_lines(dir + "/runs/elastic/segments.jsonl").size() == 3);

  // Past MAX_RESTARTS the hung segment is not requeued.
  const Segment last =
      run_segment(dir, 4, 3, 24, "MAX_RESTARTS=3 AUTOLOCO_FAULT=stop:rank=3:step=23");
  INFO(last.log);
  CHECK(last.rc == 124);
  CHECK(contains(last.log, "failed (exit 124): not requeued"));
  CHECK(read_text(dir + "/scontrol.log") == "requeue 77\n");
}
