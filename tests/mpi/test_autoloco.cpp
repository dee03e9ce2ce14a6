// AutoLoCo in the trainer (4 ranks = 2 dcs x 2 members): an adaptive interval that changes during
// a short run, with every dc holding the same anchor after every round, the corrected outer step,
// and the debug consistency check switched on.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "../support/shared_corpus.hpp"

using namespace autoloco;
using test::identical_across;
using test::identical_on_all_ranks;
using test::SharedCorpus;

TEST_CASE("autoloco across 2 dcs: H changes and every dc holds the same anchor after every round",
          "[np=4][autoloco]") {
  const SharedCorpus corpus("autoloco");
  Config config = corpus.config(2);
  config.inner.warmup_steps = 0;
  config.interval.controller = "autoloco";
  config.interval.H = 6;
  config.interval.H_min = 2;
  config.interval.H_max = 8;
  config.interval.hold_rounds = 0;
  // A set-point no real q reaches: every round after the first decides to shrink.
  config.interval.q_target = 1e3;
  config.interval.check_consistency = true;
  config.outer.correction = "momentum";
  config.run.steps = 24;
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  const Topology& topo = trainer.topology();
  MPI_Comm dc = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, topo.dc, topo.member, &dc);
  std::set<int64_t> intervals;
  int64_t planned = trainer.interval();
  for (int step = 1; step <= config.run.steps; ++step) {
    const StepResult r = trainer.train_step();
    INFO("after step " << step);
    REQUIRE(identical_across(trainer.params().values(), dc));
    if (!r.round) continue;
    REQUIRE(identical_on_all_ranks(trainer.anchor()));
    REQUIRE(torch::equal(trainer.params().values(), trainer.anchor()));
    const RoundStats& s = *r.round;
    if (step < config.run.steps) CHECK(s.H == planned);  // the last round may be cut short
    intervals.insert(s.H);
    // Correction momentum: mu^(H_k / H_0).
    CHECK(trainer.outer_optimizer().last_momentum() ==
          Approx(std::pow(0.9, static_cast<double>(s.H) / 6.0)));
    planned = trainer.interval();
    CHECK(planned >= 2);
    CHECK(planned <= 8);
  }
  MPI_Comm_free(&dc);
  CHECK(intervals.size() >= 3);    // 6, 5, 4, ... : H changed more than once
  CHECK(intervals.count(6) == 1);  // the first round ran H_0
  CHECK(*intervals.begin() == 2);  // and the rule reached H_min
}
