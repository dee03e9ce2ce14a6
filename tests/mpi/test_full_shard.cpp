// topology.shard full (ZeRO stage 3: the parameters sharded, each unit gathered for its forward
// and its backward) and model.recompute blocks: the same run unsharded, with stage 2 and fully
// sharded, with and without recomputation, ends with the same anchor within fp32 rounding, for
// 2 dcs of 2 members and of 3 (a buffer that 3 does not divide), with DiLoCo and with AutoLoCo +
// overlap + 4 fragments + an int4 wire with error feedback (the fragments' outer elements then
// come from other members' parameter shards), and with AdLoCo's adaptive batch (whose gradient
// samples the members take apart from their shards).
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "../support/anchor_outcome.hpp"
#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"

using namespace autoloco;
using test::SharedCorpus;

namespace {

enum class Variant { diloco, streaming, adloco };

Config full_config(const SharedCorpus& corpus, int members, Variant v, const std::string& shard,
                   const std::string& recompute) {
  Config c = corpus.config(members);
  c.run.name = "full-" + shard + "-" + recompute;
  c.run.steps = 24;
  c.topology.shard = shard;
  c.model.recompute = recompute;
  c.interval.H = 4;
  c.data.grad_accum = 2;  // micro-batches reduce-scattered one by one
  c.inner.optimizer = "sgd";
  c.inner.lr = 0.5;  // a rate at which SGD learns this model in a few rounds
  if (v == Variant::streaming) {
    c.model.n_layer = 4;  // a block per fragment
    c.run.steps = 36;
    c.interval.controller = "autoloco";
    c.interval.H = 12;
    c.interval.H_min = 12;
    c.interval.H_max = 16;
    c.outer.overlap_steps = 2;
    c.outer.fragments = 4;
    c.outer.wire_dtype = "int4";
    c.outer.error_feedback = true;
  }
  if (v == Variant::adloco) {
    c.data.batch_size = 2;
    c.batch.controller = "adloco";
    c.batch.theta = 0.05;  // asks for far more than the noise needs: grows every round
    c.batch.max_growth = 1.5;
    c.batch.max_batch = 6;
    c.batch.max_micro_batch = 2;  // every step accumulates micro-batches
  }
  validate(c);
  return c;
}

using test::Outcome;
constexpr auto train = test::train_outcome;

// SGD keeps a difference of rounding at the rounding's size: the full mode adds the members'
// gradients unit by unit and micro-batch by micro-batch, where the unsharded step adds each
// member's whole gradient once, so their last bits differ.
void check_full(int members, Variant v, const std::string& what, double anchor_bound,
                double eval_bound) {
  const SharedCorpus corpus("full-" + what + std::to_string(members));
  const Outcome none = train(full_config(corpus, members, v, "none", "none"));
  for (const std::string shard : {"none", "gradients", "full"}) {
    for (const std::string recompute : {"none", "blocks"}) {
      if (shard != "full" && recompute == "none") continue;  // test_shard.cpp's
      const Outcome other = train(full_config(corpus, members, v, shard, recompute));
      const double diff = (none.anchor - other.anchor).abs().max().item<double>();
      INFO(what << " on 2 dcs x " << members << " members, topology.shard " << shard
                << ", model.recompute " << recompute << ": max |anchor difference| " << diff
                << ", eval loss " << none.eval_loss << " against " << other.eval_loss);
      CHECK(other.rounds == none.rounds);
      if (shard == "none") {
        CHECK(diff == 0.0);  // recomputation alone changes no bit
      } else {
        CHECK(diff <= anchor_bound);
      }
      CHECK(std::abs(none.eval_loss - other.eval_loss) <= eval_bound);
    }
  }
}

}  // namespace

// With int4 a last-bit difference can move an element that lies on a rounding boundary by a
// whole quantisation step (measured 3.6e-3 for gradients + recompute, 1.0e-4 for full): the
// streaming runs' bounds allow a few such steps.
TEST_CASE("full sharding matches none on 2 dcs x 2 members", "[np=4][shard][full]") {
  check_full(2, Variant::diloco, "diloco", 1e-5, 1e-5);
  check_full(2, Variant::streaming, "streaming", 0.02, 1e-3);
}

TEST_CASE("full sharding matches none on 2 dcs x 3 members (uneven shards)",
          "[np=6][shard][full]") {
  check_full(3, Variant::diloco, "diloco", 1e-5, 1e-5);
  check_full(3, Variant::streaming, "streaming", 0.02, 1e-3);
}

namespace {

// This rank's sums of the round's gradient samples (NoiseSums) in the checkpoint of step `step`.
std::vector<double> noise_sums(const Config& c, int64_t step) {
  const std::string dir = test::run_dir(c) + "/checkpoints/" + checkpoint_name(step);
  return H5Reader(dir + "/" + rank_file(test::world_rank())).read_f64("round/noise_sums");
}

}  // namespace

// No member of a fully sharded dc holds a whole gradient: each keeps every member's own gradient
// on its shard, and the products of the batch test (‖g_m‖², ⟨g_m, ḡ⟩, ‖ḡ‖²) are summed over
// the shards. The sums a round has gathered in the middle of it (in the checkpoint) are those of
// the unsharded run up to the order of their additions, so the batches grow alike.
TEST_CASE("full sharding takes AdLoCo's gradient samples as the unsharded run does",
          "[np=4][shard][full][adloco]") {
  const SharedCorpus corpus("full-adloco");
  auto config = [&](const std::string& shard, const std::string& name = "whole") {
    Config c = full_config(corpus, 2, Variant::adloco, shard, "blocks");
    c.run.name = "adloco-" + shard + "-" + name;
    c.ckpt.every_minutes = 0;
    c.ckpt.keep_last = 10;
    return c;
  };
  const TrainSummary none = test::run(config("none"));
  const TrainSummary full = test::run(config("full"));
  CHECK(full.rounds == none.rounds);
  CHECK(full.final_batch == none.final_batch);
  REQUIRE(none.final_batch.size() == 2);
  CHECK(none.final_batch[0] > config("none").data.batch_size * config("none").data.grad_accum);
  CHECK(std::abs(full.final_eval_loss - none.final_eval_loss) <= 1e-4);
  test::run(config("none", "cut"), "", 14);
  test::run(config("full", "cut"), "", 14);
  const std::vector<double> a = noise_sums(config("none", "cut"), 14);
  const std::vector<double> b = noise_sums(config("full", "cut"), 14);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("round/noise_sums[" << i << "] of world rank " << test::world_rank());
    CHECK(b[i] == Approx(a[i]).epsilon(1e-4));
  }
  CHECK(a[1] > 0.0);  // the member's ‖g_m‖² summed over the round's steps so far
}

namespace {

// The state `resume` holds, loaded by a run of `c` and written again at once.
std::string rewrite(const Config& c, const std::string& resume) {
  TrainerOptions o;
  o.print_progress = false;
  o.resume = resume;
  Trainer trainer(c, MPI_COMM_WORLD, o);
  return trainer.save_checkpoint("rewritten");
}

}  // namespace

// Each member of a fully sharded dc writes its shard of the replica (and of the moments and the
// outer state): an unsharded run loads them whole, a fully sharded one its shard again, and
// either writes back the same state bit for bit, with an overlapped sync in flight.
TEST_CASE("a checkpoint of full sharding resumes unsharded and back bitwise",
          "[np=4][shard][full][resume]") {
  const SharedCorpus corpus("full-resume");
  auto config = [&](const std::string& name, const std::string& shard) {
    Config c = full_config(corpus, 2, Variant::streaming, shard, "blocks");
    c.run.name = name;
    c.inner.optimizer = "adamw";
    c.inner.lr = 0.01;
    c.interval.controller = "fixed";
    c.ckpt.every_minutes = 0;
    c.ckpt.keep_last = 10;
    validate(c);
    return c;
  };
  test::run(config("full", "full"), "", 13);
  const std::string saved =
      test::run_dir(config("full", "full")) + "/checkpoints/" + checkpoint_name(13);
  const std::string unsharded = rewrite(config("none", "none"), saved);
  const std::string again = rewrite(config("full-again", "full"), unsharded);
  MPI_Barrier(MPI_COMM_WORLD);
  test::check_same_state(saved, unsharded);
  test::check_same_state(saved, again);
}
