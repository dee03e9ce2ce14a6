// The overlapped sync (outer.overlap_steps tau > 0; 4 ranks = 2 dcs x 2 members): Streaming
// DiLoCo's tau-step overlap with alpha mixing against a single-process reference of the
// algorithm, and an exact resume from checkpoints written while a sync was in flight.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <string>

#include "../support/reference_diloco.hpp"
#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/util/mpi_threads.hpp"

using namespace autoloco;
using test::reference_diloco;
using test::run;
using test::run_dir;
using test::SharedCorpus;
using test::world_rank;

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

Config overlap_config(const SharedCorpus& corpus, int64_t tau, double alpha) {
  Config c = corpus.config(2);
  c.interval.H = 4;
  c.run.steps = 12;
  c.outer.overlap_steps = tau;
  c.outer.overlap_alpha = alpha;
  return c;
}

}  // namespace

// The default path: no thread, no late landing, alpha unused. The reference performs the blocking
// sync's operations in its order (the library's outer optimizer), so any extra step, late
// landing or mixing on the tau = 0 path shows as a difference in the last bit. (With the outer
// step written out instead, the two differ by ~1e-5.)
TEST_CASE("outer.overlap_steps 0 is blocking diloco bit for bit", "[np=4][overlap]") {
  const SharedCorpus corpus("overlap-zero");
  const Config config = overlap_config(corpus, 0, 0.5);
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  for (int step = 1; step <= 12; ++step) {
    const StepResult r = trainer.train_step();
    CHECK(r.round.has_value() == (step % 4 == 0));
    CHECK_FALSE(trainer.sync_in_flight());
  }
  REQUIRE(trainer.rounds() == 3);
  const test::ReferenceResult expected =
      reference_diloco(config, 12, 0, 0.0, test::ReferenceOuter::library);
  INFO("anchor differs from the reference by " << max_abs_diff(trainer.anchor(), expected.anchor));
  CHECK(torch::equal(trainer.anchor(), expected.anchor));
  CHECK(torch::equal(trainer.params().values(),
                     expected.replicas[static_cast<size_t>(world_rank() / 2)]));
}

// 2 dcs x 2 members, tau 1 and 2, alpha 0 and 0.5.
TEST_CASE("overlapped diloco matches a single-process reference", "[np=4][overlap]") {
  const SharedCorpus corpus("overlap-reference");
  const Config blocking = overlap_config(corpus, 0, 0.0);
  const torch::Tensor diloco = reference_diloco(blocking, 12).anchor;
  for (const int64_t tau : {1, 2}) {
    for (const double alpha : {0.0, 0.5}) {
      const Config config = overlap_config(corpus, tau, alpha);
      Trainer trainer(config, MPI_COMM_WORLD, {false, false});
      int landed = 0;
      for (int step = 1; step <= 12; ++step) {
        const StepResult r = trainer.train_step();
        if (!r.round) continue;
        ++landed;
        // Rounds end at steps 4, 8 and 12; the first two land tau steps later, the last at once.
        CHECK(step == (landed < 3 ? 4 * landed + tau : 12));
      }
      REQUIRE(trainer.rounds() == 3);
      CHECK_FALSE(trainer.sync_in_flight());
      const test::ReferenceResult expected = reference_diloco(config, 12, tau, alpha);
      const double anchor_diff = max_abs_diff(trainer.anchor(), expected.anchor);
      const double replica_diff = max_abs_diff(
          trainer.params().values(), expected.replicas[static_cast<size_t>(world_rank() / 2)]);
      // How far the late landing takes the run from blocking DiLoCo: what a wrong overlap would
      // get wrong.
      const double from_blocking = max_abs_diff(expected.anchor, diloco);
      INFO("tau " << tau << " alpha " << alpha << ": anchor differs from the reference by "
                  << anchor_diff << ", replica by " << replica_diff
                  << "; the reference differs from blocking diloco by " << from_blocking);
      // As the blocking reference test: fp32 rounding of fused and unfused forms, ~1e-5.
      CHECK(from_blocking > 1e-3);
      CHECK(anchor_diff <= 1e-4);
      CHECK(replica_diff <= 1e-4);
      CHECK(test::identical_on_all_ranks(trainer.anchor()));
    }
  }
}

namespace {

Config resume_config(const SharedCorpus& corpus, const std::string& name) {
  Config c = corpus.config(2);
  c.run.name = name;
  c.run.steps = 20;
  c.run.eval_every = 4;
  c.run.log_every = 3;
  c.interval.H = 5;
  c.outer.overlap_steps = 2;
  c.outer.overlap_alpha = 0.5;
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  return c;
}

}  // namespace

TEST_CASE("a run stopped with a sync in flight resumes bitwise equal to the uninterrupted run",
          "[np=4][overlap][resume]") {
  const SharedCorpus corpus("overlap-resume");
  const Config ref = resume_config(corpus, "reference");
  REQUIRE(run(ref).steps == 20);
  const Config cut = resume_config(corpus, "cut");
  // Rounds end at steps 5, 10, 15 and 20 and land two steps later: at steps 6 and 11 a sync is
  // in flight, at step 11 also in the middle of a round.
  const TrainSummary first = run(cut, "", 6);
  CHECK(first.stopped_by_signal);
  CHECK(first.steps == 6);
  run(cut, "auto", 11);
  const TrainSummary last = run(cut, "auto");
  CHECK(last.steps == 20);
  CHECK(last.rounds == 4);
  MPI_Barrier(MPI_COMM_WORLD);
  for (const int64_t step : {6, 11}) {
    if (world_rank() != 0) break;
    const H5Reader g(run_dir(cut) + "/checkpoints/" + checkpoint_name(step) + "/" + kGlobalFile);
    INFO("the checkpoint at step " << step << " keeps the sync in flight");
    CHECK(g.read_int("sync/pending") == 1);
    CHECK(g.read_int("sync/pending_due_step") == step + 1);
  }
  test::check_same_run(ref, cut, 20);
}

TEST_CASE("the communication thread gets MPI_THREAD_MULTIPLE", "[np=4][overlap]") {
  int provided = 0;
  MPI_Query_thread(&provided);
  // tests/mpi/main.cpp initialises MPI as the apps do (init_mpi_multithreaded).
  CHECK(provided == MPI_THREAD_MULTIPLE);
  CHECK_NOTHROW(require_mpi_thread_multiple("outer.overlap_steps"));
}
