// Faults injected into real jobs under mpiexec (AUTOLOCO_FAULT, util/fault_injection.hpp;
// docs/faults.md): a stopped rank, a dc late past the timeout, a killed rank, a dc late within
// it, a failed checkpoint write, a slow one, and an error on the main thread with a sync in
// flight. Each job either ends on its own (every rank gone, mpiexec
// non-zero, the last complete checkpoint verifying) or is unchanged by the fault.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "../support/wait.hpp"
#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/manifest.hpp"

using autoloco::test::contains;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::TestLimit;
namespace fs = std::filesystem;

namespace {

// 2 dcs of 2 ranks, H = 4, a checkpoint every 4 steps; `env` goes before the launcher.
std::string fault_job(const std::string& dir, const std::string& name, const std::string& env,
                      const std::string& extra) {
  return env + " " + AUTOLOCO_MPIEXEC +
         " -n 4 --oversubscribe --allow-run-as-root --bind-to none " + AUTOLOCO_TRAIN_EXE + " " +
         AUTOLOCO_SOURCE_DIR + "/configs/diloco.yaml" +
         " --set topology.ranks_per_dc=2 --set model.n_layer=1 --set model.d_model=32"
         " --set model.n_head=2 --set model.seq_len=32 --set run.eval_every=0"
         " --set run.log_every=4 --set inner.warmup_steps=2 --set data.batch_size=2"
         " --set interval.H=4 --set run.threads=1 --set ckpt.every_steps=4 --set run.steps=12"
         " --set data.train=" +
         dir + "/data/train_*.bin --set data.val=" + dir +
         "/data/val_*.bin --set run.out_dir=" + dir + "/runs --set run.name=" + name + " " + extra +
         " > " + dir + "/" + name + ".log 2>&1";
}

// autoloco-train processes whose command line names `dir` (zombies have none).
int live_ranks(const std::string& dir) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_text(entry.path().string() + "/cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find("autoloco-train") != std::string::npos &&
        cmdline.find(dir) != std::string::npos) {
      ++n;
    }
  }
  return n;
}

// None may outlive their job. Those that mpiexec killed take a moment to go, longer on a loaded
// machine, and nothing but their going tells it: one that is still there when the test's time
// is spent was left behind.
int survivors(const std::string& dir, const TestLimit& limit) {
  autoloco::test::wait_until([&] { return live_ranks(dir) == 0; },
                             [&] { return limit.time_left(); });
  return live_ranks(dir);
}

// The newest complete checkpoint of run `name` is at `step` and verifies.
void check_last_checkpoint(const std::string& dir, const std::string& name, int64_t step) {
  const auto found = autoloco::list_checkpoints(dir + "/runs/" + name + "/checkpoints");
  REQUIRE_FALSE(found.empty());
  CHECK(found[0].step == step);
  CHECK(autoloco::verify_checkpoint(found[0].path).empty());
}

}  // namespace

TEST_CASE("e2e: a stopped rank ends every rank within the timeout with the watchdog message",
          "[e2e][faults]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-fault-stop");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  // Rank 3 stops at step 6: its dc partner waits in the gradient all-reduce, the other dc in
  // the stop agreement or the sync of round 2.
  const int rc = run_command(
      fault_job(dir, "stopped", "AUTOLOCO_FAULT=stop:rank=3:step=6", "--set comm.timeout_s=3"));
  const std::string log = read_text(dir + "/stopped.log");
  INFO(log);
  CHECK(rc == 124);
  CHECK(contains(log, "AUTOLOCO_FAULT: stopping this rank (SIGSTOP) at step 6"));
  CHECK(contains(log, "error: "));
  // Whichever watchdog fires first ends the job: rank 2 in step 6, or ranks 0-1 in step 7.
  CHECK((contains(log, "at step 6 has waited") || contains(log, "at step 7 has waited")));
  CHECK(contains(log, "past comm.timeout_s = 3"));
  CHECK(survivors(dir, limit) == 0);
  check_last_checkpoint(dir, "stopped", 4);
}

TEST_CASE("e2e: a dc late past the timeout is named by the ranks waiting in the inter-dc ring",
          "[e2e][faults]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-fault-late-long");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const int rc = run_command(fault_job(dir, "late", "AUTOLOCO_FAULT=late:dc=1:seconds=60:round=2",
                                       "--set comm.timeout_s=3"));
  const std::string log = read_text(dir + "/late.log");
  INFO(log);
  CHECK(rc == 124);
  CHECK(contains(log, "the inter-dc all-reduce of round 2 at step 8 has waited"));
  CHECK(contains(log, "ring reduce-scatter step 1 of 1: receiving from world rank"));
  CHECK(survivors(dir, limit) == 0);
  check_last_checkpoint(dir, "late", 4);
}

TEST_CASE("e2e: a rank killed mid-round ends the job with no rank left and the checkpoint intact",
          "[e2e][faults]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-fault-kill");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const int rc = run_command(fault_job(dir, "killed", "AUTOLOCO_FAULT=kill:rank=1:step=7", ""));
  const std::string log = read_text(dir + "/killed.log");
  INFO(log);
  CHECK(rc != 0);
  CHECK(contains(log, "AUTOLOCO_FAULT: killing this rank (SIGKILL) at step 7"));
  CHECK(survivors(dir, limit) == 0);
  check_last_checkpoint(dir, "killed", 4);
}

TEST_CASE("e2e: a dc late by less than the timeout ends bitwise equal to the undelayed run",
          "[e2e][faults]") {
  const autoloco::test::TempDir tmp("e2e-fault-late-short");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  REQUIRE(run_command(fault_job(dir, "prompt", "", "--set comm.timeout_s=10")) == 0);
  REQUIRE(run_command(fault_job(dir, "late", "AUTOLOCO_FAULT=late:dc=0:seconds=1",
                                "--set comm.timeout_s=10")) == 0);
  INFO(read_text(dir + "/late.log"));
  const auto a = autoloco::read_manifest(dir + "/runs/prompt/checkpoints/step_12");
  const auto b = autoloco::read_manifest(dir + "/runs/late/checkpoints/step_12");
  // The state (the files also hold the run's name and its timings, which differ).
  int compared = 0;
  for (const char* file : {"global.h5", "dc_0.h5", "dc_1.h5"}) {
    const auto* fa = a.find(file);
    const auto* fb = b.find(file);
    REQUIRE(fa != nullptr);
    REQUIRE(fb != nullptr);
    for (const char* set : {"outer/anchor", "outer/momentum", "counters/rounds", "replica/values",
                            "adamw/exp_avg", "adamw/exp_avg_sq"}) {
      if (!fa->datasets.count(set)) continue;
      INFO(file << " " << set);
      REQUIRE(fb->datasets.count(set) == 1);
      CHECK(fa->datasets.at(set).crc == fb->datasets.at(set).crc);
      ++compared;
    }
  }
  CHECK(compared == 9);
}

TEST_CASE("e2e: a failed checkpoint write stops the run and leaves the previous checkpoint",
          "[e2e][faults]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-fault-ckpt");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const int rc = run_command(fault_job(dir, "full", "AUTOLOCO_FAULT=ckpt-fail:step=8:rank=2", ""));
  const std::string log = read_text(dir + "/full.log");
  INFO(log);
  CHECK(rc == 1);
  CHECK(contains(log, "checkpoint at step 8 failed (rank 2: "));
  CHECK(contains(log, "rank_2.h5': write failed: no space left on device"));
  CHECK_FALSE(fs::exists(dir + "/runs/full/checkpoints/step_8"));
  CHECK(survivors(dir, limit) == 0);
  check_last_checkpoint(dir, "full", 4);
  // The job can go on from it once the disk has room.
  REQUIRE(run_command(fault_job(dir, "full", "", "--resume auto")) == 0);
  check_last_checkpoint(dir, "full", 12);
}

TEST_CASE("e2e: a timeout shorter than one sync's link time is refused before any work",
          "[e2e][faults]") {
  const autoloco::test::TempDir tmp("e2e-fault-refuse");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const int rc = run_command(
      fault_job(dir, "slow", "",
                "--set comm.timeout_s=5 --set wan.bandwidth_gbps=0.00001 --set wan.mode=sleep"));
  const std::string log = read_text(dir + "/slow.log");
  INFO(log);
  CHECK(rc == 1);
  CHECK(contains(log, "config key comm.timeout_s = 5 s is shorter than the"));
  CHECK(contains(log, "wan.bandwidth_gbps = 1e-05"));
  CHECK_FALSE(fs::exists(dir + "/runs/slow/metrics.jsonl"));
}

TEST_CASE(
    "e2e: an error on the main thread with a sync in flight ends the job at once, "
    "without a watchdog",
    "[e2e][faults]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-fault-error");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  // Round 1's sync (steps 1-4) is on the communication thread until step 6, and dc 1 starts
  // its part 600 s late, so rank 1's thread waits in the ring with its receive and send posted.
  // Rank 1 fails in step 5 with the step's stop agreement in flight, while its dc partner waits
  // for it in the gradient all-reduce. comm.timeout_s 0: nothing but the error itself may end
  // the job; the outer `timeout` only tells a hang (a wait for the late dc) from an end. The job
  // ends in seconds: its bound leaves a loaded machine minutes, short of the late dc and of
  // ctest's TIMEOUT.
  const int rc = run_command(fault_job(
      dir, "failing",
      "AUTOLOCO_FAULT=error:rank=1:step=5,late:dc=1:seconds=600:round=1 timeout -s KILL 400",
      "--set outer.overlap_steps=2 --set comm.timeout_s=0 --set ckpt.every_steps=0"));
  const std::string log = read_text(dir + "/failing.log");
  INFO(log);
  CHECK(rc == 1);
  CHECK(contains(log, "[rank 1] error: an error injected by AUTOLOCO_FAULT in step 5"));
  // Under the asan preset: no use of freed memory by posted requests, no leak report.
  CHECK_FALSE(contains(log, "AddressSanitizer"));
  CHECK_FALSE(contains(log, "LeakSanitizer"));
  CHECK(survivors(dir, limit) == 0);
}

TEST_CASE("e2e: a checkpoint write slower than comm.timeout_s is bounded by ckpt.timeout_s",
          "[e2e][faults]") {
  const TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-fault-ckpt-slow");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  // World rank 0 takes 4 s longer over its files of step 4; the others wait for it in the
  // checkpoint's agreement, twice comm.timeout_s.
  const std::string slow = "AUTOLOCO_FAULT=ckpt-slow:step=4:seconds=4";
  REQUIRE(run_command(fault_job(dir, "patient", slow, "--set comm.timeout_s=2")) == 0);
  const std::string log = read_text(dir + "/patient.log");
  INFO(log);
  CHECK(contains(log, "checkpoints: world rank 0 writes"));
  CHECK(contains(log, "ckpt.timeout_s 3600"));
  check_last_checkpoint(dir, "patient", 12);
  CHECK(autoloco::verify_checkpoint(dir + "/runs/patient/checkpoints/step_4").empty());

  // With a bound shorter than the write, the watchdog ends the job and names the key.
  const int rc =
      run_command(fault_job(dir, "bounded", slow, "--set comm.timeout_s=2 --set ckpt.timeout_s=3"));
  const std::string bounded = read_text(dir + "/bounded.log");
  INFO(bounded);
  CHECK(rc == 124);
  CHECK(contains(bounded, "a checkpoint's write (every rank waits for the slowest writer)"));
  CHECK(contains(bounded, "past ckpt.timeout_s = 3"));
  CHECK(survivors(dir, limit) == 0);
  CHECK_FALSE(fs::exists(dir + "/runs/bounded/checkpoints/step_4"));
}
