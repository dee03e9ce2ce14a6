// Exact resume (4 ranks = 2 dcs x 2 members, AutoLoCo with H changing every round): a run
// stopped by the stop protocol at a round boundary, in the middle of a round, or twice, then
// resumed with --resume auto, ends with the same anchor, outer momentum, replicas, AdamW state,
// controller state, data cursors, loss lines and H sequence as the run that was never stopped.
// Damaged checkpoints are skipped for an older one; a different model, topology or config is
// refused with a message that names the difference.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include <mpi.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using test::check_same_state;
using test::lines_without_clock;
using test::run;
using test::run_dir;
using test::SharedCorpus;
using test::world_rank;
namespace fs = std::filesystem;

namespace {

Config resume_config(const SharedCorpus& corpus, const std::string& name) {
  Config c = corpus.config(2);
  c.run.name = name;
  c.run.steps = 40;
  c.run.eval_every = 10;
  c.run.log_every = 3;  // metrics lines that straddle the stops: the loss sums are restored
  c.inner.warmup_steps = 4;
  c.outer.momentum = 0.8;
  c.outer.correction = "momentum";
  c.interval.controller = "autoloco";
  c.interval.H = 7;
  c.interval.H_min = 2;
  c.interval.H_max = 10;
  c.interval.hold_rounds = 0;
  c.interval.q_target = 1e3;  // every round decides to shrink: H 7, 5, 4, 3, 2, ...
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  return c;
}

// The uninterrupted run, its final checkpoint and its round ends.
struct Reference {
  Config config;
  std::string final_checkpoint;
  std::vector<int64_t> round_ends;
};

Reference reference_run(const SharedCorpus& corpus) {
  Reference r;
  r.config = resume_config(corpus, "reference");
  const TrainSummary s = run(r.config);
  REQUIRE(s.steps == 40);
  REQUIRE(std::set<int64_t>(s.h_per_round.begin(), s.h_per_round.end()).size() >= 3);
  int64_t step = 0;
  for (int64_t H : s.h_per_round)
    r.round_ends.push_back(step += H);
  r.final_checkpoint = run_dir(r.config) + "/checkpoints/" + checkpoint_name(40);
  return r;
}

void check_same_run(const Reference& ref, const Config& resumed) {
  MPI_Barrier(MPI_COMM_WORLD);
  check_same_state(ref.final_checkpoint, run_dir(resumed) + "/checkpoints/" + checkpoint_name(40));
  if (world_rank() != 0) return;
  for (const char* file : {"/metrics.jsonl", "/syncs.jsonl"}) {
    INFO(file);
    CHECK(lines_without_clock(run_dir(ref.config) + file) ==
          lines_without_clock(run_dir(resumed) + file));
  }
}

}  // namespace

TEST_CASE("resume at a round boundary ends bitwise equal to the uninterrupted run",
          "[np=4][resume]") {
  const SharedCorpus corpus("resume-boundary");
  const Reference ref = reference_run(corpus);
  const Config cut = resume_config(corpus, "cut");
  const int64_t stop = ref.round_ends.at(1);
  const TrainSummary first = run(cut, "", stop);
  CHECK(first.stopped_by_signal);
  CHECK(first.steps == stop);
  const TrainSummary rest = run(cut, "auto");
  CHECK(rest.steps == 40);
  check_same_run(ref, cut);
}

TEST_CASE("resume in the middle of a round ends bitwise equal to the uninterrupted run",
          "[np=4][resume]") {
  const SharedCorpus corpus("resume-mid");
  const Reference ref = reference_run(corpus);
  const Config cut = resume_config(corpus, "cut");
  const int64_t stop = ref.round_ends.at(0) + 2;  // the second round has 5 steps
  REQUIRE(stop < ref.round_ends.at(1));
  run(cut, "", stop);
  run(cut, "auto");
  check_same_run(ref, cut);
}

TEST_CASE("resume twice ends bitwise equal to the uninterrupted run", "[np=4][resume]") {
  const SharedCorpus corpus("resume-twice");
  const Reference ref = reference_run(corpus);
  const Config cut = resume_config(corpus, "cut");
  run(cut, "", 9);
  run(cut, "auto", 23);
  const TrainSummary last = run(cut, "auto");
  CHECK(last.steps == 40);
  check_same_run(ref, cut);
  if (world_rank() == 0) {
    for (int64_t step : {9, 23, 40}) {
      CHECK(fs::exists(run_dir(cut) + "/checkpoints/" + checkpoint_name(step)));
    }
  }
}

namespace {

// Flips 64 bytes in the middle of a file (inside the large datasets of a dc file).
void damage(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(f.tellg());
  std::string bytes(64, '\0');
  f.seekg(size / 2);
  f.read(bytes.data(), 64);
  for (char& b : bytes)
    b = static_cast<char>(~b);
  f.seekp(size / 2);
  f.write(bytes.data(), 64);
}

}  // namespace

TEST_CASE("resume auto skips a corrupted or truncated newest checkpoint for the one before",
          "[np=4][resume]") {
  const SharedCorpus corpus("resume-damaged");
  const Reference ref = reference_run(corpus);
  Config cut = resume_config(corpus, "cut");
  cut.ckpt.every_steps = 10;
  run(cut, "", 25);  // checkpoints at steps 10, 20 and 25 (the stop)
  const std::string ckpts = run_dir(cut) + "/checkpoints/";
  if (world_rank() == 0) {
    REQUIRE(list_checkpoints(ckpts).size() == 3);
    damage(ckpts + checkpoint_name(25) + "/" + dc_file(1));  // a crc mismatch on dc 1's ranks
    fs::resize_file(ckpts + checkpoint_name(20) + "/" + rank_file(3), 100);  // truncated
    // The quick check sees the truncation only; the damage shows when dc 1 reads its file.
    CHECK(inspect_checkpoint(ckpts + checkpoint_name(25)).ok());
    CHECK_FALSE(inspect_checkpoint(ckpts + checkpoint_name(20)).ok());
    CHECK_FALSE(verify_checkpoint(ckpts + checkpoint_name(25)).empty());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TrainerOptions o;
  o.print_progress = false;
  o.resume = "auto";
  {
    Trainer trainer(cut, MPI_COMM_WORLD, o);
    CHECK(trainer.step() == 10);
    CHECK(trainer.resumed_from() == ckpts + checkpoint_name(10));
    trainer.train();
  }
  check_same_run(ref, cut);
  if (world_rank() == 0) {
    // Set aside, not deleted; never offered again.
    CHECK(fs::exists(ckpts + "rejected-" + checkpoint_name(25)));
    CHECK(fs::exists(ckpts + "rejected-" + checkpoint_name(20)));
  }
}

TEST_CASE("resume refuses another model or topology or config naming the difference",
          "[np=4][resume]") {
  const SharedCorpus corpus("resume-mismatch");
  Config c = resume_config(corpus, "base");
  run(c, "", 8);
  const std::string ckpt = run_dir(c) + "/checkpoints/" + checkpoint_name(8);
  TrainerOptions o;
  o.print_progress = false;
  o.resume = ckpt;

  Config wider = c;
  wider.model.d_model = 48;
  CHECK_THROWS_WITH(Trainer(wider, MPI_COMM_WORLD, o),
                    Catch::Contains("the model differs") && Catch::Contains(",48]"));

  Config four_dcs = c;
  four_dcs.topology.ranks_per_dc = 1;
  CHECK_THROWS_WITH(Trainer(four_dcs, MPI_COMM_WORLD, o),
                    Catch::Contains("2 dcs x 2 members") && Catch::Contains("4 dcs x 1") &&
                        Catch::Contains("--allow-topology-change"));

  Config other_lr = c;
  other_lr.inner.lr = 0.02;
  other_lr.interval.H_max = 12;
  CHECK_THROWS_WITH(Trainer(other_lr, MPI_COMM_WORLD, o),
                    Catch::Contains("inner.lr: 0.01 in the checkpoint, 0.02 now") &&
                        Catch::Contains("interval.H_max: 10 in the checkpoint, 12 now"));

  Config shorter = c;
  shorter.run.steps = 5;
  CHECK_THROWS_WITH(Trainer(shorter, MPI_COMM_WORLD, o),
                    Catch::Contains("it is at step 8 and run.steps is 5"));

  // Safe keys may change: a longer run continues from the checkpoint.
  Config longer = c;
  longer.run.steps = 44;
  longer.run.log_every = 4;
  Trainer trainer(longer, MPI_COMM_WORLD, o);
  CHECK(trainer.step() == 8);
  CHECK(trainer.train().steps == 44);
}

TEST_CASE("a timed checkpoint is taken by every rank at the same step and resumes exactly",
          "[np=4][resume]") {
  const SharedCorpus corpus("resume-timed");
  const Reference ref = reference_run(corpus);
  Config timed = resume_config(corpus, "timed");
  timed.ckpt.every_minutes = 1e-6;  // due at every step: rank 0 asks, all agree a step later
  timed.ckpt.at_end = true;
  run(timed, "", 17);
  const std::string ckpts = run_dir(timed) + "/checkpoints/";
  if (world_rank() == 0) {
    const auto list = list_checkpoints(ckpts);
    REQUIRE(list.size() >= 2);  // timed ones every other step, then the stop's
    for (const auto& c : list) {
      INFO(c.path);
      CHECK(verify_checkpoint(c.path).empty());
    }
    CHECK(list[0].manifest->reason == "signal");
    CHECK(list[1].manifest->reason == "every_minutes");
  }
  timed.ckpt.every_minutes = 0;  // a safe change: logged, and the run continues as before
  run(timed, "auto");
  check_same_run(ref, timed);
}
