// Streaming DiLoCo's fragments (outer.fragments P; 4 ranks = 2 dcs x 2 members): P = 1 against
// the reference bit for bit, P = 2 with overlap against the single-process reference of the
// streaming algorithm, one syncs.jsonl line per fragment sync, and an exact resume from
// checkpoints written while a fragment's sync was in flight.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "../support/reference_diloco.hpp"
#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"

using namespace autoloco;
using test::reference_diloco;
using test::ReferenceOuter;
using test::run;
using test::run_dir;
using test::SharedCorpus;
using test::world_rank;

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

Config streaming_config(const SharedCorpus& corpus, int64_t P, int64_t tau, double alpha) {
  Config c = corpus.config(2);
  c.interval.H = 4;
  c.run.steps = 12;
  c.outer.fragments = P;
  c.outer.overlap_steps = tau;
  c.outer.overlap_alpha = alpha;
  return c;
}

void train_steps(Trainer& trainer, int steps) {
  for (int step = 1; step <= steps; ++step)
    trainer.train_step();
}

}  // namespace

TEST_CASE("outer.fragments 1 is the overlapped sync as before, bit for bit", "[np=4][streaming]") {
  const SharedCorpus corpus("streaming-one");
  const Config config = streaming_config(corpus, 1, 2, 0.5);
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  train_steps(trainer, 12);
  REQUIRE(trainer.rounds() == 3);
  const test::ReferenceResult expected =
      reference_diloco(config, 12, 2, 0.5, ReferenceOuter::library);
  INFO("anchor differs from the reference by " << max_abs_diff(trainer.anchor(), expected.anchor));
  CHECK(torch::equal(trainer.anchor(), expected.anchor));
  CHECK(torch::equal(trainer.params().values(),
                     expected.replicas[static_cast<size_t>(world_rank() / 2)]));
}

// P = 2 over H = 4: fragment 1 syncs at steps 2, 6, 10, fragment 0 at 4, 8, 12; tau 1.
TEST_CASE("streaming fragments match a single-process reference", "[np=4][streaming]") {
  const SharedCorpus corpus("streaming-reference");
  const torch::Tensor whole = reference_diloco(streaming_config(corpus, 1, 1, 0.0), 12, 1).anchor;
  for (const double alpha : {0.0, 0.5}) {
    const Config config = streaming_config(corpus, 2, 1, alpha);
    Trainer trainer(config, MPI_COMM_WORLD, {false, false});
    train_steps(trainer, 12);
    REQUIRE(trainer.rounds() == 3);
    CHECK_FALSE(trainer.sync_in_flight());
    const test::ReferenceResult expected = reference_diloco(config, 12, 1, alpha);
    const double anchor_diff = max_abs_diff(trainer.anchor(), expected.anchor);
    const double replica_diff = max_abs_diff(
        trainer.params().values(), expected.replicas[static_cast<size_t>(world_rank() / 2)]);
    // What fragments change: the reference with one fragment differs by far more.
    const double from_whole = max_abs_diff(expected.anchor, whole);
    INFO("alpha " << alpha << ": anchor differs from the reference by " << anchor_diff
                  << ", replica by " << replica_diff << "; from the one-fragment run by "
                  << from_whole);
    // As the blocking reference test: fp32 rounding of fused and unfused forms, ~1e-5.
    CHECK(from_whole > 1e-3);
    CHECK(anchor_diff <= 1e-4);
    CHECK(replica_diff <= 1e-4);
    // With the library's outer step, the very operations: equal to the bit.
    const test::ReferenceResult same =
        reference_diloco(config, 12, 1, alpha, ReferenceOuter::library);
    CHECK(torch::equal(trainer.anchor(), same.anchor));
    CHECK(test::identical_on_all_ranks(trainer.anchor()));
  }
}

namespace {

Config resume_config(const SharedCorpus& corpus, const std::string& name) {
  Config c = corpus.config(2);
  c.run.name = name;
  c.run.steps = 24;
  c.run.eval_every = 6;
  c.run.log_every = 5;
  c.interval.H = 8;
  c.outer.fragments = 2;
  c.outer.overlap_steps = 2;
  c.outer.overlap_alpha = 0.5;
  c.interval.check_consistency = true;
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  return c;
}

}  // namespace

TEST_CASE("a run stopped with a fragment in flight resumes bitwise equal to the uninterrupted run",
          "[np=4][streaming][resume]") {
  const SharedCorpus corpus("streaming-resume");
  const Config ref = resume_config(corpus, "reference");
  const TrainSummary whole = run(ref);
  REQUIRE(whole.steps == 24);
  const Config cut = resume_config(corpus, "cut");
  // Fragment 1 syncs at steps 4, 12, 20 and fragment 0 at 8, 16, 24, each landing 2 steps
  // later: at steps 5 and 13 fragment 1 is in flight, at 13 also in the middle of a cycle.
  CHECK(run(cut, "", 5).steps == 5);
  run(cut, "auto", 13);
  const TrainSummary last = run(cut, "auto");
  CHECK(last.steps == 24);
  CHECK(last.rounds == 3);
  MPI_Barrier(MPI_COMM_WORLD);
  for (const int64_t step : {5, 13}) {
    if (world_rank() != 0) break;
    const H5Reader g(run_dir(cut) + "/checkpoints/" + checkpoint_name(step) + "/" + kGlobalFile);
    INFO("the checkpoint at step " << step << " keeps fragment 1's sync in flight");
    CHECK(g.read_int("sync/pending") == 1);
    CHECK(g.read_i64("sync/pending_round").at(4) == 1);
  }
  test::check_same_run(ref, cut, 24);
  if (world_rank() != 0) return;
  // One line per fragment sync, naming it (fragment 1 also at the run's end, for steps 21-24);
  // the peak sync is about half of a whole one.
  std::ifstream syncs(run_dir(ref) + "/syncs.jsonl");
  std::string line;
  int fragment_lines[2] = {0, 0};
  while (std::getline(syncs, line)) {
    if (line.find("\"fragment\":0") != std::string::npos) ++fragment_lines[0];
    if (line.find("\"fragment\":1") != std::string::npos) ++fragment_lines[1];
  }
  CHECK(fragment_lines[0] == 3);
  CHECK(fragment_lines[1] == 4);
  CHECK(whole.peak_sync_bytes * 7 >= whole.inter_dc_bytes);
  CHECK(whole.peak_sync_bytes * 7 < 2 * whole.inter_dc_bytes);
}

namespace {

// The value of `key` in a syncs.jsonl line (-1 when absent).
double field(const std::string& line, const std::string& key) {
  const std::string tag = "\"" + key + "\":";
  const size_t at = line.find(tag);
  return at == std::string::npos ? -1.0 : std::stod(line.substr(at + tag.size()));
}

}  // namespace

// interval.target_utilisation when the link changes on resume: on a fast link the floor stays
// under the fixed H = 4; on a link a million times slower it lifts the next interval to the
// rest of the run (the floor's cap), whatever the machine's exact step time.
TEST_CASE("the link-aware interval follows a link that slows down on resume",
          "[np=4][streaming][link_aware]") {
  const SharedCorpus corpus("link-aware");
  Config c = corpus.config(2);
  c.run.name = "link";
  c.run.steps = 40;
  c.interval.H = 4;
  c.interval.target_utilisation = 0.5;
  c.wan.latency_ms = 0.0;
  c.wan.bandwidth_gbps = 1000.0;
  c.ckpt.every_minutes = 0;
  CHECK(run(c, "", 8).steps == 8);
  c.wan.bandwidth_gbps = 1e-6;
  const TrainSummary resumed = run(c, "auto");
  CHECK(resumed.steps == 40);
  CHECK(resumed.h_per_round == std::vector<int64_t>{4, 4, 4, 28});
  if (world_rank() != 0) return;
  std::ifstream syncs(run_dir(c) + "/syncs.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(syncs, line);)
    lines.push_back(line);
  REQUIRE(lines.size() == 4);
  for (size_t i = 0; i < 2; ++i) {
    INFO(lines[i]);
    CHECK(field(lines[i], "controller_H") == 4.0);
    CHECK(field(lines[i], "link_floor_H") <= 4.0);
    CHECK(field(lines[i], "next_H") == 4.0);
  }
  INFO(lines[2]);
  CHECK(field(lines[2], "link_floor_H") == 40.0);
  CHECK(field(lines[2], "next_H") == 40.0);
  CHECK(field(lines[2], "exposed_link_s") > 1.0);
}
