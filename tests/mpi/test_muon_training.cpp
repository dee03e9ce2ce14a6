// Training with Muon inner steps (2 dcs of one rank): a run resumes bitwise mid-round, MuLoCo
// with SparseLoCo's wire trains, and a checkpoint of another inner optimizer is refused naming
// inner.optimizer.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <string>

#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using test::run;
using test::SharedCorpus;

namespace {

// 24 steps of DiLoCo (H 4) with Muon, a checkpoint at every evaluation (every 6 steps).
Config muon_config(const SharedCorpus& corpus, const std::string& name) {
  Config c = corpus.config(1);
  c.run.name = name;
  c.run.steps = 24;
  c.run.eval_every = 6;
  c.interval.H = 4;
  c.inner.optimizer = "muon";
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  return c;
}

}  // namespace

TEST_CASE("a run with Muon inner steps resumes bitwise mid-round", "[np=2][muon][resume]") {
  const SharedCorpus corpus("muon-resume");
  const Config ref = muon_config(corpus, "reference");
  Config cut = ref;
  cut.run.name = "cut";
  const TrainSummary whole = run(ref);
  REQUIRE(whole.steps == 24);
  CHECK(run(cut, "", 10).steps == 10);  // mid-round: rounds end at 8 and 12
  CHECK(run(cut, "auto").steps == 24);
  test::check_same_run(ref, cut, 24);
}

TEST_CASE("MuLoCo over SparseLoCo's wire trains: Muon, top-k int2, error-feedback momentum",
          "[np=2][muon][sparse]") {
  const SharedCorpus corpus("muon-sparse");
  Config c = muon_config(corpus, "muloco");
  c.run.eval_every = 0;
  c.outer.wire_dtype = "int2";
  c.outer.wire_topk = 0.05;
  c.outer.wire_topk_chunk = 256;
  c.outer.error_feedback = true;
  c.outer.error_feedback_beta = 0.95;
  c.outer.momentum_mode = "error_feedback";
  c.outer.lr = 1.0;
  Trainer trainer(c, MPI_COMM_WORLD, {false, false});
  double first = 0.0;
  double last = 0.0;
  for (int step = 1; step <= 24; ++step) {
    const double loss = trainer.train_step().loss;
    if (step <= 4) first += loss / 4;
    if (step > 20) last += loss / 4;
  }
  INFO("mean loss of the first 4 steps " << first << ", of the last 4 " << last);
  CHECK(last < first - 0.1);
}

TEST_CASE("resuming a checkpoint of another inner optimizer is refused naming the key",
          "[np=2][muon][resume]") {
  const SharedCorpus corpus("muon-refuse");
  Config adamw = muon_config(corpus, "switch");
  adamw.inner.optimizer = "adamw";
  adamw.run.steps = 6;
  REQUIRE(run(adamw).steps == 6);
  Config muon = adamw;
  muon.inner.optimizer = "muon";
  muon.run.steps = 12;
  // The moments mean other things (Muon's momentum is AdamW's first moment over 1 - mu): the
  // resume's config check refuses the key.
  CHECK_THROWS_WITH(run(muon, "auto"),
                    Catch::Contains("inner.optimizer: \"adamw\" in the checkpoint, \"muon\" now"));
}
