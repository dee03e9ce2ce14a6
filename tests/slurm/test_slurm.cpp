// The sbatch template (scripts/slurm/autoloco.sbatch) under a real Slurm: a lab of 2 nodes
// (scripts/slurm-lab.sh) per test, jobs launched with srun --mpi=pmix (the template chooses it),
// one dc of one rank per node. A run past its time limit is signalled, checkpoints, is requeued,
// resumes and ends bitwise equal to an uninterrupted run; scancel is not requeued and leaves a
// valid checkpoint; a lost node makes the requeued job resume with fewer dcs; MAX_RESTARTS holds.
// The runs sleep out a modelled link of 0.4 s a sync (wan.mode sleep, 200 ms latency), so that
// they last long enough for Slurm's signal whatever the machine's speed, at little CPU.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/manifest.hpp"
#include "slurm_lab.hpp"

using autoloco::test::contains;
using autoloco::test::count_lines;
using autoloco::test::read_lines;
using autoloco::test::read_text;
using autoloco::test::shell;
using autoloco::test::SlurmLab;

namespace {

// The run's config overrides: 2 dcs of one rank, a tiny model on the tiny corpus in `dir`.
std::string run_sets(const std::string& dir, int64_t steps, const std::string& wan_mode) {
  return " --set topology.ranks_per_dc=1 --set model.n_layer=1 --set model.d_model=32"
         " --set model.n_head=2 --set model.seq_len=32 --set data.batch_size=2"
         " --set run.threads=1 --set run.eval_every=0 --set run.log_every=100"
         " --set interval.controller=fixed --set interval.H=20 --set inner.warmup_steps=10"
         " --set ckpt.every_steps=200 --set wan.latency_ms=200 --set wan.mode=" +
         wan_mode + " --set run.steps=" + std::to_string(steps) + " --set data.train=" + dir +
         "/data/train_*.bin --set data.val=" + dir + "/data/val_*.bin";
}

// sbatch of the template on the lab; returns the job id. `slurm` are sbatch's options.
std::string submit(const SlurmLab& lab, const std::string& dir, const std::string& run,
                   int64_t steps, const std::string& slurm, const std::string& env = "") {
  return autoloco::test::submit_template(
      lab, dir, run, slurm, "configs/diloco.yaml" + run_sets(dir, steps, "sleep"), env);
}

std::string job_log(const std::string& dir, const std::string& run, const std::string& job) {
  return read_text(dir + "/" + run + "-" + job + ".out");
}

// Fails the test unless a wait for `what` ended with it (the job ended first, or the test's time
// ran out), with the run's log `log` and what Slurm says of `job`.
void require_waited(bool waited, const std::string& what, const SlurmLab& lab,
                    const std::string& job, const std::string& log) {
  if (waited) return;
  INFO(log);
  INFO(lab.diagnose(job));
  FAIL("the job ended, or the test's time ran out, before " << what);
}

// The CRC-32 of a float dataset of a checkpoint's file, from its manifest.
uint32_t dataset_crc(const std::string& checkpoint, const std::string& file,
                     const std::string& dataset) {
  const autoloco::Manifest m = autoloco::read_manifest(checkpoint);
  const auto* f = m.find(file);
  REQUIRE(f != nullptr);
  REQUIRE(f->datasets.count(dataset) == 1);
  return f->datasets.at(dataset).crc;
}

}  // namespace

TEST_CASE(
    "slurm: a run past its time limit checkpoints, is requeued, resumes and ends bitwise "
    "equal to an uninterrupted run",
    "[slurm]") {
  const autoloco::test::TempDir tmp("slurm-time");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  // The lab first: its waits count the test's time from its making.
  SlurmLab lab(2, "t");
  // The uninterrupted run, outside Slurm (the link modelled, not slept: the same numbers).
  const auto reference = shell(
      std::string(AUTOLOCO_MPIEXEC) + " -n 2 --oversubscribe --allow-run-as-root --bind-to none " +
      AUTOLOCO_TRAIN_EXE + " " + AUTOLOCO_SOURCE_DIR + "/configs/diloco.yaml --set run.name=ref" +
      " --set run.out_dir=" + dir + "/runs" + run_sets(dir, 4500, "account"));
  INFO(reference.text);
  REQUIRE(reference.rc == 0);

  // 4500 steps, 225 syncs of 0.4 s: about 100 s, past the signal. Slurm looks at time limits
  // every 30 s and sends it early by up to that much: with 120 s and 30 s of warning, between
  // 60 s and 90 s into a segment (never before the run is launched), 30 s before the limit.
  const std::string job = submit(lab, dir, "timed", 4500, "--nodes=2 --time=2 --signal=B:USR1@30");
  int requeues = 0;
  const bool done = lab.wait_done(job, &requeues);
  const std::string log = job_log(dir, "timed", job);
  INFO(log);
  INFO(lab.diagnose(job));
  REQUIRE(done);
  CHECK(requeues >= 1);
  CHECK(contains(log, "srun: --mpi=pmix"));
  CHECK(contains(log, "SIGUSR1: the time limit is near"));
  CHECK(contains(log, "stopped by a signal after a checkpoint: requeueing job " + job));
  CHECK(contains(log, "segment 2:"));
  CHECK(contains(log, "the run finished"));
  CHECK(lab.state(job) == "COMPLETED");
  // Each dc on a node of its own, and each segment in the run's history.
  const std::string summary = read_text(dir + "/runs/timed/summary.json");
  CHECK(contains(summary, "\"hosts\":[\"" + lab.name() + "-h0\"]"));
  CHECK(contains(summary, "\"hosts\":[\"" + lab.name() + "-h1\"]"));
  CHECK(contains(summary, R"("stopped_by_signal":false)"));
  const auto segments = read_lines(dir + "/runs/timed/segments.jsonl");
  REQUIRE(segments.size() == static_cast<size_t>(requeues) + 1);
  CHECK(contains(segments[0], "\"slurm\":{\"job_id\":\"" + job + "\",\"segment\":0,"));
  CHECK(contains(segments[1], "\"slurm\":{\"job_id\":\"" + job + "\",\"segment\":1,"));
  CHECK(contains(segments[1], "\"resumed_from\":\"" + dir + "/runs/timed/checkpoints/step_"));
  for (const char* file : {"global.h5", "dc_0.h5", "dc_1.h5"}) {
    for (const char* set : {"outer/anchor", "outer/momentum", "replica/values"}) {
      const std::string a = dir + "/runs/ref/checkpoints/step_4500";
      const std::string b = dir + "/runs/timed/checkpoints/step_4500";
      const autoloco::Manifest m = autoloco::read_manifest(a);
      if (m.find(file) == nullptr || m.find(file)->datasets.count(set) == 0) continue;
      INFO(file << " " << set);
      CHECK(dataset_crc(a, file, set) == dataset_crc(b, file, set));
    }
  }
}

TEST_CASE("slurm: scancel stops the run with a valid checkpoint and is not requeued", "[slurm]") {
  const autoloco::test::TempDir tmp("slurm-cancel");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  SlurmLab lab(2, "c");
  const std::string job = submit(lab, dir, "cancelled", 100000, "--nodes=2");
  // Cancel once the run has logged a few steps.
  const std::string metrics = dir + "/runs/cancelled/metrics.jsonl";
  const bool logged =
      lab.wait([&] { return count_lines(metrics) >= 2; }, [&] { return !lab.ended(job); });
  require_waited(logged, "2 lines in " + metrics, lab, job, job_log(dir, "cancelled", job));
  CHECK(lab.exec("scancel " + job).rc == 0);
  const bool done = lab.wait_done(job);
  const std::string log = job_log(dir, "cancelled", job);
  INFO(log);
  REQUIRE(done);
  CHECK(lab.state(job) == "CANCELLED");
  CHECK_FALSE(contains(log, "requeueing"));
  const auto checkpoints = autoloco::list_checkpoints(dir + "/runs/cancelled/checkpoints");
  REQUIRE_FALSE(checkpoints.empty());
  CHECK(autoloco::verify_checkpoint(checkpoints.front().path).empty());
  CHECK(contains(read_text(dir + "/runs/cancelled/summary.json"), R"("stopped_by_signal":true)"));
}

TEST_CASE("slurm: a job that loses a node is requeued and resumes with fewer dcs", "[slurm]") {
  const autoloco::test::TempDir tmp("slurm-node");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  SlurmLab lab(2, "n");
  const std::string job = submit(lab, dir, "shrunk", 1200, "--nodes=2");
  // Take a node away once the run has its first checkpoint: Slurm requeues the job itself
  // (node failure), and it waits for 2 nodes until the operator shrinks it to the one left
  // (Slurm 22.05 would start a --nodes=1-2 job on 1 node even with 2 free).
  const std::string ckpts = dir + "/runs/shrunk/checkpoints";
  const bool saved = lab.wait([&] { return !autoloco::list_checkpoints(ckpts).empty(); },
                              [&] { return !lab.ended(job); });
  require_waited(saved, "a checkpoint in " + ckpts, lab, job, job_log(dir, "shrunk", job));
  const auto failed = shell(std::string(AUTOLOCO_SOURCE_DIR) +
                            "/scripts/slurm-lab.sh fail h1 --name " + lab.name());
  INFO(failed.text);
  CHECK(failed.rc == 0);
  // Requeued, the job stays pending: 2 nodes do not fit in the one left.
  std::string seen;
  const bool requeued = lab.wait(
      [&] {
        seen = lab.state(job);
        return seen == "PENDING";
      },
      [&] { return !SlurmLab::is_end_state(seen); });
  require_waited(requeued, "the job pending again without its node h1", lab, job,
                 job_log(dir, "shrunk", job));
  CHECK(lab.exec("scontrol update jobid=" + job + " numnodes=1 numtasks=1").rc == 0);
  const bool done = lab.wait_done(job);
  const std::string log = job_log(dir, "shrunk", job);
  INFO(log);
  REQUIRE(done);
  CHECK(contains(log, "DUE TO NODE FAILURE"));
  CHECK(contains(log, "1 nodes, 1 tasks = 1 dc(s) of 1 ranks"));
  const std::string summary = read_text(dir + "/runs/shrunk/summary.json");
  CHECK(contains(summary, R"("topology_change":{"from_dcs":2,"to_dcs":1)"));
  CHECK(contains(summary, R"("steps":1200)"));
  const auto segments = read_lines(dir + "/runs/shrunk/segments.jsonl");
  REQUIRE(segments.size() >= 2);
  CHECK(contains(segments.front(), R"("num_dcs":2,)"));
  CHECK(contains(segments.back(), R"("num_dcs":1,)"));
}

TEST_CASE("slurm: a run stopped at its time limit past MAX_RESTARTS is not requeued", "[slurm]") {
  const autoloco::test::TempDir tmp("slurm-max");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  SlurmLab lab(2, "m");
  const std::string job =
      submit(lab, dir, "limited", 4500, "--nodes=2 --time=2 --signal=B:USR1@30", "MAX_RESTARTS=0");
  int requeues = 0;
  const bool done = lab.wait_done(job, &requeues);
  const std::string log = job_log(dir, "limited", job);
  INFO(log);
  REQUIRE(done);
  CHECK(requeues == 0);
  CHECK(contains(log, "reach MAX_RESTARTS: not requeued"));
  CHECK(lab.state(job) == "COMPLETED");
  CHECK(contains(read_text(dir + "/runs/limited/summary.json"), R"("stopped_by_signal":true)"));
}

TEST_CASE("slurm: sweep.py submits a grid, resubmits the run that was cancelled, and reports",
          "[slurm]") {
  const autoloco::test::TempDir tmp("slurm-sweep");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  std::ofstream(dir + "/spec.yaml")
      << "base: configs/diloco.yaml\nout: " << dir << "/sweep\nranks: 2\nseeds: [1]\nset:\n"
      << "  model.n_layer: 1\n  model.d_model: 32\n  model.n_head: 2\n  model.seq_len: 32\n"
      << "  data.batch_size: 2\n  data.train: " << dir << "/data/train_*.bin\n  data.val: " << dir
      << "/data/val_*.bin\n  run.steps: 160\n  run.eval_every: 80\n  run.threads: 1\n"
      << "  inner.warmup_steps: 2\n  ckpt.every_steps: 20\n  wan.mode: sleep\n"
      << "  wan.latency_ms: 100\n"
      << "groups:\n  - name: diloco\n    grid: {interval.H: [2, 4]}\n  - name: autoloco\n"
      << "    set: {interval.controller: autoloco, interval.H: 3, interval.H_min: 2,\n"
      << "          interval.H_max: 6}\n"
      << "curves:\n  diloco: {groups: [diloco]}\nadaptive: [autoloco]\n";
  const std::string sweep = "cd " + std::string(AUTOLOCO_SOURCE_DIR) +
                            " && /usr/bin/python3 scripts/sweep.py --spec " + dir +
                            "/spec.yaml --no-build --bin " + AUTOLOCO_TRAIN_EXE;
  SlurmLab lab(2, "s");
  const auto first = lab.exec(sweep + " --slurm --sbatch=--ntasks-per-node=1");
  INFO(first.text);
  REQUIRE(first.rc == 0);
  CHECK(contains(first.text, "submitted 3 jobs"));
  // Cancel the longest run (H 2: 80 syncs of 0.2 s) once it has a checkpoint.
  const std::string ckpts = dir + "/sweep/diloco_H2_s1/checkpoints";
  const bool saved = lab.wait([&] { return !autoloco::list_checkpoints(ckpts).empty(); },
                              [&] { return lab.queued("--name=autoloco-diloco_H2_s1"); });
  require_waited(saved, "a checkpoint in " + ckpts, lab, "",
                 shell("cat " + dir + "/sweep/logs/diloco_H2_s1.*.log").text);
  CHECK(lab.exec("scancel --name=autoloco-diloco_H2_s1").rc == 0);
  REQUIRE(lab.wait_idle());
  CHECK(
      contains(read_text(dir + "/sweep/diloco_H2_s1/summary.json"), R"("stopped_by_signal":true)"));

  // Submitted again, only the cancelled run goes, and resumes from its checkpoint.
  const auto second = lab.exec(sweep + " --slurm --sbatch=--ntasks-per-node=1");
  INFO(second.text);
  REQUIRE(second.rc == 0);
  CHECK(contains(second.text, "submitted 1 jobs"));
  REQUIRE(lab.wait_idle());
  CHECK(contains(read_text(dir + "/sweep/diloco_H2_s1/summary.json"),
                 R"("stopped_by_signal":false)"));
  CHECK(read_lines(dir + "/sweep/diloco_H2_s1/segments.jsonl").size() == 2);

  const auto report = shell(sweep + " --report");
  INFO(report.text);
  REQUIRE(report.rc == 0);
  CHECK(autoloco::test::count_lines(dir + "/sweep/results.csv") == 1 + 3);
  CHECK(contains(read_text(dir + "/sweep/table.md"), "| diloco | 2 |"));
  CHECK(contains(read_text(dir + "/sweep/saving.md"), "| autoloco |"));
}
