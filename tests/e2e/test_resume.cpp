// End to end with the real executable under mpiexec: a SIGTERM to one rank of a running job
// ends in a checkpoint and a clean exit (code 0) of every rank, and --resume auto continues it;
// a job killed (SIGKILL) while it writes a checkpoint leaves the previous one usable, and the
// resumed run ends in the same state as a run that was never killed; checkpoints whose every
// CRC-32 is right but whose values cannot be restored are passed over for an older one.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../support/crafted_checkpoint.hpp"
#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "../support/wait.hpp"
#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"

using autoloco::test::count_lines;
using autoloco::test::json_number;
using autoloco::test::read_lines;
using autoloco::test::read_text;
using autoloco::test::wait_until;
namespace fs = std::filesystem;

namespace {

std::string train_command(const std::string& dir, const std::string& name, int64_t steps,
                          const std::string& extra) {
  return std::string(AUTOLOCO_MPIEXEC) +
         " -n 2 --oversubscribe --allow-run-as-root --bind-to none " + AUTOLOCO_TRAIN_EXE + " " +
         AUTOLOCO_SOURCE_DIR + "/configs/diloco.yaml" +
         " --set model.n_layer=2 --set model.d_model=32 --set model.n_head=2"
         " --set model.seq_len=32 --set run.eval_every=0 --set run.log_every=5"
         " --set inner.warmup_steps=5 --set inner.lr=0.01 --set data.batch_size=4"
         " --set interval.H=4 --set run.threads=1 --set data.train=" +
         dir + "/data/train_*.bin --set data.val=" + dir +
         "/data/val_*.bin --set run.out_dir=" + dir + "/runs --set run.name=" + name +
         " --set run.steps=" + std::to_string(steps) + " " + extra;
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

// The pids of the processes named `comm` (any, when empty) whose parent is `parent`.
std::vector<int> child_pids(int parent, const std::string& comm) {
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(entry.path().string() + "/stat");
    // pid (comm) state ppid ...
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    if (!comm.empty() && stat.find("(" + comm + ")") == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// The ranks of the job whose subshell is `subshell`: its child is the launcher, the ranks are
// the launcher's children. Only this job's: other tests' jobs may run beside it.
std::vector<int> rank_pids(int subshell) {
  for (const int launcher : child_pids(subshell, "")) {
    std::vector<int> ranks = child_pids(launcher, "autoloco-train");
    if (!ranks.empty()) return ranks;
  }
  return {};
}

}  // namespace

TEST_CASE("e2e: SIGTERM to one rank under mpiexec saves a checkpoint and every rank exits 0",
          "[e2e][resume]") {
  const autoloco::test::TestLimit limit;
  const autoloco::test::TempDir tmp("e2e-sigterm");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string run = dir + "/runs/long";
  // In the background: the launcher's pid, then its exit code when it ends (whole, by a rename:
  // the file's existence says the job ended).
  const std::string launch = "(" + train_command(dir, "long", 1000000, "") + " > " + dir +
                             "/train.log 2>&1; echo $? > " + dir + "/rc.tmp; mv " + dir +
                             "/rc.tmp " + dir + "/rc) & echo $! > " + dir + "/pid";
  const std::string wrapper = "sh -c '" + launch + "'";
  REQUIRE(std::system(wrapper.c_str()) == 0);
  // The subshell's child is mpiexec; the ranks are mpiexec's children.
  const int subshell = std::stoi(read_text(dir + "/pid"));
  const auto ended = [&] { return fs::exists(dir + "/rc"); };
  const auto running = [&] { return !ended() && limit.time_left(); };
  // Each wait on the job ends with the job, or with the test's time: then the job is ended here,
  // so that it outlives neither the test nor its files.
  const auto require_waited = [&](bool waited, const std::string& what) {
    if (waited) return;
    const bool job_ended = ended();
    if (!job_ended) {
      for (const int rank : rank_pids(subshell))
        ::kill(rank, SIGKILL);
    }
    INFO(read_text(dir + "/train.log"));
    FAIL((job_ended ? "the job ended" : "the test's time ran out") << " before " << what);
  };
  require_waited(wait_until([&] { return count_lines(run + "/metrics.jsonl") >= 3; }, running),
                 "3 lines in metrics.jsonl");
  std::vector<int> ranks;
  const bool found = wait_until(
      [&] {
        ranks = rank_pids(subshell);
        return ranks.size() == 2;
      },
      running);
  require_waited(found, "its 2 ranks");
  REQUIRE(::kill(ranks[1], SIGTERM) == 0);
  require_waited(wait_until(ended, [&] { return limit.time_left(); }),
                 "its end after SIGTERM to rank 1");
  const std::string log = read_text(dir + "/train.log");
  INFO(log);
  CHECK(std::stoi(read_text(dir + "/rc")) == 0);
  CHECK(log.find("stop requested (signal)") != std::string::npos);
  CHECK(log.find("checkpoint (signal) at step") != std::string::npos);
  const std::string summary = read_text(run + "/summary.json");
  CHECK(summary.find("\"stopped_by_signal\":true") != std::string::npos);
  const auto steps = static_cast<int64_t>(json_number(summary, "steps"));
  const auto checkpoints = autoloco::list_checkpoints(run + "/checkpoints");
  REQUIRE(checkpoints.size() == 1);
  CHECK(checkpoints[0].step == steps);
  CHECK(checkpoints[0].manifest->reason == "signal");
  CHECK(autoloco::verify_checkpoint(checkpoints[0].path).empty());

  // A requeued job: the same command with --resume auto, here shortened to a few more steps.
  const std::string resume =
      train_command(dir, "long", steps + 6, "--resume auto") + " > " + dir + "/resume.log 2>&1";
  REQUIRE(std::system(resume.c_str()) == 0);
  const std::string resumed_log = read_text(dir + "/resume.log");
  INFO(resumed_log);
  CHECK(resumed_log.find("resume: run.steps is " + std::to_string(steps + 6) +
                         " (was 1000000 in the checkpoint)") != std::string::npos);
  CHECK(resumed_log.find("resumed from " + checkpoints[0].path) != std::string::npos);
  const std::string final_summary = read_text(run + "/summary.json");
  CHECK(json_number(final_summary, "steps") == steps + 6);
  CHECK(final_summary.find("\"stopped_by_signal\":false") != std::string::npos);
}

TEST_CASE("e2e: SIGKILL while a checkpoint is written leaves the previous one to resume from",
          "[e2e][resume]") {
  const autoloco::test::TempDir tmp("e2e-sigkill");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string every = "--set ckpt.every_steps=5";
  REQUIRE(
      std::system((train_command(dir, "reference", 30, every) + " > " + dir + "/reference.log 2>&1")
                      .c_str()) == 0);

  // World rank 0 kills itself after the data files of step 15, before the manifest.
  const std::string killed = "AUTOLOCO_TEST_KILL_IN_CHECKPOINT=15 " +
                             train_command(dir, "killed", 30, every) + " > " + dir +
                             "/killed.log 2>&1";
  CHECK(std::system(killed.c_str()) != 0);
  const std::string ckpts = dir + "/runs/killed/checkpoints";
  CHECK(fs::exists(ckpts + "/.tmp-step_15/" + autoloco::kGlobalFile));
  CHECK_FALSE(fs::exists(ckpts + "/.tmp-step_15/" + autoloco::kManifestFile));
  const auto before = autoloco::list_checkpoints(ckpts);
  REQUIRE(before.size() == 2);  // step_10 and step_5: the partial one is not a checkpoint
  CHECK(before[0].step == 10);
  CHECK(autoloco::verify_checkpoint(before[0].path).empty());

  const std::string resume =
      train_command(dir, "killed", 30, every + " --resume auto") + " > " + dir + "/resume.log 2>&1";
  REQUIRE(std::system(resume.c_str()) == 0);
  INFO(read_text(dir + "/resume.log"));
  CHECK(read_text(dir + "/resume.log").find("resumed from " + before[0].path) != std::string::npos);
  CHECK_FALSE(fs::exists(ckpts + "/.tmp-step_15"));  // pruned by the next checkpoint
  // The same final state as the run that was never killed (the manifests' CRC-32s).
  const autoloco::Manifest a = autoloco::read_manifest(dir + "/runs/reference/checkpoints/step_30");
  const autoloco::Manifest b = autoloco::read_manifest(ckpts + "/step_30");
  for (const char* file : {"global.h5", "dc_0.h5", "dc_1.h5"}) {
    for (const char* set : {"outer/anchor", "outer/momentum", "replica/values", "adamw/exp_avg"}) {
      const auto* fa = a.find(file);
      const auto* fb = b.find(file);
      REQUIRE(fa != nullptr);
      REQUIRE(fb != nullptr);
      if (!fa->datasets.count(set)) continue;
      INFO(file << " " << set);
      CHECK(fa->datasets.at(set).crc == fb->datasets.at(set).crc);
    }
  }
  CHECK(read_text(dir + "/runs/reference/syncs.jsonl").size() > 0);
  CHECK(count_lines(dir + "/runs/reference/syncs.jsonl") ==
        count_lines(dir + "/runs/killed/syncs.jsonl"));
}

TEST_CASE("e2e: resume auto passes over checkpoints whose CRCs are right but whose restore fails",
          "[e2e][resume]") {
  const autoloco::test::TempDir tmp("e2e-crafted");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  // Rounds end at steps 4 and 8 and their syncs land 2 steps later: the checkpoints of steps 4
  // and 8 hold a sync in flight; step 10 is the end.
  const std::string overlap = "--set ckpt.every_steps=4 --set outer.overlap_steps=2";
  REQUIRE(std::system((train_command(dir, "crafted", 10, overlap) + " > " + dir + "/first.log 2>&1")
                          .c_str()) == 0);
  const std::string ckpts = dir + "/runs/crafted/checkpoints/";
  const std::string step4 = ckpts + autoloco::checkpoint_name(4);
  const std::string step8 = ckpts + autoloco::checkpoint_name(8);
  const std::string step10 = ckpts + autoloco::checkpoint_name(10);
  REQUIRE(autoloco::H5Reader(step8 + "/" + autoloco::kGlobalFile).read_int("sync/pending") == 1);

  // Step 10: rank 1's RNG state is 7 bytes; LibTorch refuses it (a c10::Error, not a
  // CheckpointError) on rank 1 only.
  autoloco::test::rewrite_dataset(step10, autoloco::rank_file(1), "rng/cpu",
                                  [](autoloco::H5Writer& w) {
                                    const std::vector<uint8_t> rng(7, 1);
                                    w.write("rng/cpu", rng.data(), {7});
                                  });
  // Step 8: the sync in flight has 3 scalars, no round message of 2 dcs; the outer step that
  // lands it would index past them.
  autoloco::test::rewrite_dataset(step8, autoloco::kGlobalFile, "sync/pending_scalars",
                                  [](autoloco::H5Writer& w) {
                                    w.write("sync/pending_scalars", std::vector<double>{1, 2, 3});
                                  });
  for (const std::string& c : {step8, step10}) {
    INFO(c);
    CHECK(autoloco::verify_checkpoint(c).empty());  // every size and CRC-32 is right
  }

  const std::string resume = train_command(dir, "crafted", 12, overlap + " --resume auto") + " > " +
                             dir + "/resume.log 2>&1";
  const int rc = std::system(resume.c_str());
  const std::string log = read_text(dir + "/resume.log");
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("checkpoint " + step10 + " is damaged (rank 1: '" + step10 +
                 "': cannot restore: ") != std::string::npos);
  CHECK(log.find("checkpoint " + step8 + " is damaged") != std::string::npos);
  CHECK(log.find("sync/pending_scalars holds 3 values") != std::string::npos);
  CHECK(log.find("resumed from " + step4) != std::string::npos);
  CHECK(fs::exists(ckpts + "rejected-" + autoloco::checkpoint_name(10)));
  CHECK(fs::exists(ckpts + "rejected-" + autoloco::checkpoint_name(8)));
  CHECK(json_number(read_text(dir + "/runs/crafted/summary.json"), "steps") == 12);
}

TEST_CASE(
    "e2e: logs shorter than the checkpoint recorded resume with a warning, longer ones "
    "are cut back",
    "[e2e][resume]") {
  const autoloco::test::TempDir tmp("e2e-short-logs");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string every = "--set ckpt.every_steps=20";
  const std::string log = dir + "/run.log";
  REQUIRE(std::system((train_command(dir, "run", 40, every) + " > " + log + " 2>&1").c_str()) == 0);
  const std::string run = dir + "/runs/run";
  const size_t lines = read_lines(run + "/metrics.jsonl").size();
  // As after a node crash: the newest checkpoint never reached the disk.
  fs::remove_all(run + "/checkpoints/step_40");
  const std::string resume =
      train_command(dir, "run", 40, every + " --resume auto") + " >> " + log + " 2>&1";

  SECTION("shorter: the crash also lost the tail of metrics.jsonl, mid-line") {
    REQUIRE(fs::file_size(run + "/metrics.jsonl") > 300);
    fs::resize_file(run + "/metrics.jsonl", 300);
    REQUIRE(std::system(resume.c_str()) == 0);
    const std::string text = read_text(log);
    INFO(text);
    CHECK(text.find("metrics.jsonl came back with 300 of the") != std::string::npos);
    CHECK(text.find("that the checkpoint of step 20 recorded") != std::string::npos);
    CHECK(text.find("its lines after step ") != std::string::npos);
    CHECK(text.find("the resumed run appends from step 20 on") != std::string::npos);
    check_whole_lines(run + "/metrics.jsonl");
    const auto now = read_lines(run + "/metrics.jsonl");
    CHECK(now.size() < lines);
    CHECK(now.back().find("\"step\":40") != std::string::npos);
    check_whole_lines(run + "/syncs.jsonl");
  }
  SECTION("longer: the lines past the checkpoint are cut back and written again") {
    REQUIRE(std::system(resume.c_str()) == 0);
    INFO(read_text(log));
    CHECK(read_text(log).find("came back with") == std::string::npos);
    check_whole_lines(run + "/metrics.jsonl");
    CHECK(read_lines(run + "/metrics.jsonl").size() == lines);
  }
}
