// Training over the compressed wire formats (2 dcs of one rank): DiLoCo's loss falls with every
// format, with and without error feedback, and ddp's over int8; runs with stochastic 4-bit
// rounding and error feedback resume bitwise, blocking and over fragments on the communication
// thread with a sync in flight; a pseudo-gradient that is not finite stops the run with an
// error naming the dc and the round.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/train/outer_sync.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using test::run;
using test::SharedCorpus;
using test::world_rank;

namespace {

Config compressed_config(const SharedCorpus& corpus, const std::string& format) {
  Config c = corpus.config(1);
  c.run.name = format;
  c.run.steps = 24;
  c.interval.H = 4;
  c.outer.wire_dtype = format;
  c.outer.wire_block = 32;
  c.interval.check_consistency = true;
  return c;
}

// Trains 24 steps: the mean loss of the first 4 less that of the last 4.
double loss_drop(Trainer& trainer) {
  double first = 0.0;
  double last = 0.0;
  for (int step = 1; step <= 24; ++step) {
    const double loss = trainer.train_step().loss;
    if (step <= 4) first += loss / 4;
    if (step > 20) last += loss / 4;
  }
  return first - last;
}

// A run of 24 steps that checkpoints at every evaluation (every 6 steps), named `name`.
Config resume_config(const SharedCorpus& corpus, const std::string& format,
                     const std::string& name) {
  Config c = compressed_config(corpus, format);
  c.run.name = name;
  c.run.eval_every = 6;
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  return c;
}

}  // namespace

TEST_CASE("diloco trains over every wire format: the loss falls", "[np=2][compressed]") {
  const SharedCorpus corpus("compressed-train");
  for (const std::string format :
       {"bf16", "fp8", "int8", "int4", "e3m0", "e3m0+ef", "int2+ef", "topk+int2", "sparseloco"}) {
    INFO("outer.wire_dtype " << format);
    const bool sparseloco = format == "sparseloco";
    const bool topk = format == "topk+int2" || sparseloco;
    const bool feedback = topk || format.find('+') != std::string::npos;
    Config c = compressed_config(corpus, topk ? "int2" : format.substr(0, 4));
    c.outer.error_feedback = feedback;
    if (topk) {
      // SparseLoCo's wire: 10% of every 256 values, 2 bits each, the residual decayed.
      c.outer.wire_topk = 0.1;
      c.outer.wire_topk_chunk = 256;
      c.outer.error_feedback_beta = 0.9;
    }
    // ...and its outer step: no momentum, the residual in its place.
    if (sparseloco) c.outer.momentum_mode = "error_feedback";
    Trainer trainer(c, MPI_COMM_WORLD, {false, false});
    CHECK(loss_drop(trainer) > 0.3);
    CHECK(trainer.rounds() == 6);
    CHECK(test::identical_on_all_ranks(trainer.anchor()));
    if (topk) {
      // Each round one message of the sparse encoding and the round's scalars per dc.
      const size_t n = static_cast<size_t>(trainer.params().numel());
      const int64_t message = static_cast<int64_t>(
          WanLink::message_bytes(n, wire_codec(c.outer), OuterSync::message_scalars(2)));
      CHECK(trainer.wan().dc_bytes() == 6 * message);
      CHECK(message < static_cast<int64_t>(n));  // under a byte per value
    }
  }
}

TEST_CASE("a run over the sparse top-k int2 wire with a decayed residual resumes bitwise",
          "[np=2][compressed][resume]") {
  const SharedCorpus corpus("compressed-topk-resume");
  Config ref = resume_config(corpus, "int2", "reference");
  ref.outer.wire_rounding = "stochastic";
  ref.outer.error_feedback = true;
  ref.outer.error_feedback_beta = 0.9;
  ref.outer.wire_topk = 0.05;
  ref.outer.wire_topk_chunk = 128;
  Config cut = ref;
  cut.run.name = "cut";
  const TrainSummary whole = run(ref);
  REQUIRE(whole.steps == 24);
  CHECK(run(cut, "", 10).steps == 10);  // mid-round: rounds end at 8 and 12
  const TrainSummary last = run(cut, "auto");
  CHECK(last.steps == 24);
  CHECK(last.sent_bytes == whole.sent_bytes);
  test::check_same_run(ref, cut, 24);
}

TEST_CASE("ddp sends its gradients over the compressed path and trains", "[np=2][compressed]") {
  const SharedCorpus corpus("compressed-ddp");
  Config c = compressed_config(corpus, "int8");
  c.outer.method = "ddp";
  Trainer trainer(c, MPI_COMM_WORLD, {false, false});
  CHECK(loss_drop(trainer) > 0.3);
  // One all-reduce of the gradients a step, in int8 with its scales: about a quarter of fp32.
  const size_t n = static_cast<size_t>(trainer.params().numel());
  CHECK(trainer.wan().messages() == 24);
  CHECK(trainer.wan().dc_bytes() ==
        24 * static_cast<int64_t>(WanLink::message_bytes(n, WireCodec{WireFormat::int8, 32}, 0)));
  CHECK(test::identical_on_all_ranks(trainer.params().values()));
}

TEST_CASE("a run over stochastically rounded int4 with error feedback resumes bitwise",
          "[np=2][compressed][resume]") {
  const SharedCorpus corpus("compressed-resume");
  Config ref = resume_config(corpus, "int4", "reference");
  ref.outer.wire_rounding = "stochastic";
  ref.outer.error_feedback = true;
  Config cut = ref;
  cut.run.name = "cut";
  const TrainSummary whole = run(ref);
  REQUIRE(whole.steps == 24);
  CHECK(whole.sent_bytes > 0);
  CHECK(run(cut, "", 10).steps == 10);  // mid-round: rounds end at 8 and 12
  const TrainSummary last = run(cut, "auto");
  CHECK(last.steps == 24);
  CHECK(last.sent_bytes == whole.sent_bytes);
  test::check_same_run(ref, cut, 24);
}

TEST_CASE("compressed fragments on the communication thread resume bitwise with a sync in flight",
          "[np=2][compressed][resume]") {
  const SharedCorpus corpus("compressed-streaming");
  Config ref = resume_config(corpus, "e3m0", "reference");
  ref.interval.H = 8;
  ref.outer.fragments = 2;
  ref.outer.overlap_steps = 2;
  ref.outer.overlap_alpha = 0.5;
  ref.outer.wire_rounding = "stochastic";
  ref.outer.error_feedback = true;
  Config cut = ref;
  cut.run.name = "cut";
  const TrainSummary whole = run(ref);
  REQUIRE(whole.steps == 24);
  // Fragment 1 syncs at steps 4, 12 and 20, fragment 0 at 8, 16 and 24, each landing 2 steps
  // later: at steps 5 and 13 a sync is in flight.
  CHECK(run(cut, "", 5).steps == 5);
  run(cut, "auto", 13);
  CHECK(run(cut, "auto").steps == 24);
  test::check_same_run(ref, cut, 24);
}

TEST_CASE("a pseudo-gradient that is not finite is an error naming the dc and the round",
          "[np=2][compressed]") {
  const SharedCorpus corpus("compressed-nan");
  Config c = compressed_config(corpus, "int8");
  c.interval.check_consistency = false;
  Trainer trainer(c, MPI_COMM_WORLD, {false, false});
  for (int step = 1; step <= 5; ++step)
    trainer.train_step();
  // Every dc's replica diverges, so every rank fails before round 2's all-reduce (step 8).
  trainer.params().values().fill_(std::numeric_limits<float>::quiet_NaN());
  for (int step = 6; step <= 7; ++step)
    trainer.train_step();
  std::string message;
  try {
    trainer.train_step();
  } catch (const TrainingError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("dc " + std::to_string(world_rank())) &&
                          Catch::Contains("round 2") && Catch::Contains("not finite"));
}
