// What a failing node, a failing rank or slow storage leaves behind (issue 31): logs that came
// back shorter than a checkpoint recorded are resumed with a warning, longer ones are cut back;
// an error on the main thread with a sync in flight ends the job at once, with or without the
// watchdog; a checkpoint write slower than comm.timeout_s is bounded by ckpt.timeout_s instead.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "autoloco/ckpt/checkpoint_dir.hpp"

using autoloco::test::contains;
using autoloco::test::read_lines;
using autoloco::test::read_text;
using autoloco::test::run_command;
namespace fs = std::filesystem;

namespace {

// 2 dcs of 2 ranks of a tiny DiLoCo, H = 4; `env` goes before the launcher, the output to
// DIR/NAME.log (appended: a resume adds to it).
std::string job(const std::string& dir, const std::string& name, const std::string& env,
                const std::string& extra) {
  return env + " " + AUTOLOCO_MPIEXEC +
         " -n 4 --oversubscribe --allow-run-as-root --bind-to none " + AUTOLOCO_TRAIN_EXE + " " +
         AUTOLOCO_SOURCE_DIR + "/configs/diloco.yaml" +
         " --set topology.ranks_per_dc=2 --set model.n_layer=1 --set model.d_model=32"
         " --set model.n_head=2 --set model.seq_len=32 --set run.eval_every=10"
         " --set run.eval_batches=2 --set run.log_every=2 --set inner.warmup_steps=2"
         " --set data.batch_size=2 --set interval.H=4 --set run.threads=1 --set data.train=" +
         dir + "/data/train_*.bin --set data.val=" + dir +
         "/data/val_*.bin --set run.out_dir=" + dir + "/runs --set run.name=" + name + " " + extra +
         " >> " + dir + "/" + name + ".log 2>&1";
}

// Every line is one whole JSON object (a cut never leaves half a line).
void check_whole_lines(const std::string& path) {
  for (const std::string& line : read_lines(path)) {
    INFO(path << ": " << line);
    REQUIRE(!line.empty());
    CHECK(line.front() == '{');
    CHECK(line.back() == '}');
  }
}

// autoloco-train processes whose command line names `dir`, after they had up to 30 s to go.
int survivors(const std::string& dir) {
  auto live = [&dir] {
    int n = 0;
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string pid = entry.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = read_text(entry.path().string() + "/cmdline");
      for (char& c : cmdline)
        if (c == '\0') c = ' ';
      n += contains(cmdline, "autoloco-train") && contains(cmdline, dir) ? 1 : 0;
    }
    return n;
  };
  for (int i = 0; i < 300 && live() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return live();
}

}  // namespace

TEST_CASE(
    "e2e: logs shorter than the checkpoint recorded resume with a warning, longer ones "
    "are cut back",
    "[e2e][resume]") {
  const autoloco::test::TempDir tmp("e2e-short-logs");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string every = "--set ckpt.every_steps=20 --set run.steps=40";
  REQUIRE(run_command(job(dir, "whole", "", every)) == 0);
  const std::string whole = dir + "/runs/whole";
  const size_t lines = read_lines(whole + "/metrics.jsonl").size();

  SECTION("shorter: a node crash lost the tail of metrics.jsonl") {
    // As after a crash: the newest checkpoint never reached the disk, nor did the logs past
    // the first 300 bytes (mid-line).
    fs::remove_all(whole + "/checkpoints/step_40");
    REQUIRE(fs::file_size(whole + "/metrics.jsonl") > 300);
    fs::resize_file(whole + "/metrics.jsonl", 300);
    REQUIRE(run_command(job(dir, "whole", "", every + " --resume auto")) == 0);
    const std::string log = read_text(dir + "/whole.log");
    INFO(log);
    CHECK(contains(log, "metrics.jsonl came back with 300 of the"));
    CHECK(contains(log, "that the checkpoint of step 20 recorded"));
    CHECK(contains(log, "its lines after step "));
    CHECK(contains(log, "the resumed run appends from step 20 on"));
    check_whole_lines(whole + "/metrics.jsonl");
    const auto now = read_lines(whole + "/metrics.jsonl");
    CHECK(now.size() < lines);
    CHECK(contains(now.back(), "\"step\":40"));
    check_whole_lines(whole + "/syncs.jsonl");
  }
  SECTION("longer: the lines past the checkpoint are cut back and written again") {
    fs::remove_all(whole + "/checkpoints/step_40");
    REQUIRE(run_command(job(dir, "whole", "", every + " --resume auto")) == 0);
    const std::string log = read_text(dir + "/whole.log");
    INFO(log);
    CHECK_FALSE(contains(log, "came back with"));
    check_whole_lines(whole + "/metrics.jsonl");
    CHECK(read_lines(whole + "/metrics.jsonl").size() == lines);
  }
}

TEST_CASE(
    "e2e: an error on the main thread with a sync in flight ends the job at once, "
    "without a watchdog",
    "[e2e][faults]") {
  const autoloco::test::TempDir tmp("e2e-error-in-flight");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  // Round 1's sync (steps 1-4) is on the communication thread until step 6; rank 1 fails in
  // step 5 with the step's stop agreement in flight, while its dc partner waits for it in the
  // gradient all-reduce (and so never joins the next agreement). comm.timeout_s 0: nothing but
  // the error itself may end the job. The outer `timeout` only tells a hang from an end.
  const int rc =
      run_command(job(dir, "failing", "AUTOLOCO_FAULT=error:rank=1:step=5 timeout -s KILL 120",
                      "--set outer.overlap_steps=2 --set comm.timeout_s=0 --set run.steps=400"));
  const std::string log = read_text(dir + "/failing.log");
  INFO(log);
  CHECK(rc == 1);
  CHECK(contains(log, "[rank 1] error: an error injected by AUTOLOCO_FAULT in step 5"));
  // Under the asan preset: no use of freed memory by the posted requests, no leak report.
  CHECK_FALSE(contains(log, "AddressSanitizer"));
  CHECK_FALSE(contains(log, "LeakSanitizer"));
  CHECK(survivors(dir) == 0);
}

TEST_CASE("e2e: a checkpoint write slower than comm.timeout_s is bounded by ckpt.timeout_s",
          "[e2e][faults]") {
  const autoloco::test::TempDir tmp("e2e-slow-ckpt");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  // World rank 0 takes 4 s longer over its files of step 4; the others wait for it in the
  // checkpoint's agreement, twice comm.timeout_s.
  const std::string slow = "AUTOLOCO_FAULT=ckpt-slow:step=4:seconds=4";
  const std::string args = "--set comm.timeout_s=2 --set ckpt.every_steps=4 --set run.steps=8";
  REQUIRE(run_command(job(dir, "patient", slow, args)) == 0);
  const std::string log = read_text(dir + "/patient.log");
  INFO(log);
  CHECK(contains(log, "checkpoints: world rank 0 writes"));
  CHECK(contains(log, "ckpt.timeout_s 3600"));
  const auto found = autoloco::list_checkpoints(dir + "/runs/patient/checkpoints");
  REQUIRE(found.size() == 2);
  CHECK(found[1].step == 4);

  // With a bound shorter than the write, the watchdog ends the job and names the key.
  const int rc = run_command(job(dir, "bounded", slow, args + " --set ckpt.timeout_s=3"));
  const std::string bounded = read_text(dir + "/bounded.log");
  INFO(bounded);
  CHECK(rc == 124);
  CHECK(contains(bounded, "a checkpoint's write (every rank waits for the slowest writer)"));
  CHECK(contains(bounded, "past ckpt.timeout_s = 3"));
  CHECK(survivors(dir) == 0);
}
