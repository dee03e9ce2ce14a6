// Several datacenters (4 ranks = 2 dcs x 2 members): the hierarchical all-reduce, DiLoCo against
// a single-process reference of the algorithm, the sign check, replica and anchor agreement, and
// the WAN model's accounting.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "../support/dc_layout.hpp"
#include "../support/reference_diloco.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/lr_schedule.hpp"

using namespace autoloco;
using test::identical_across;
using test::identical_on_all_ranks;
using test::Layout;
using test::reference_diloco;
using test::SharedCorpus;

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace

TEST_CASE("hierarchical all-reduce equals a plain MPI_Allreduce across dcs for uneven sizes",
          "[np=4][multi_dc]") {
  Layout layout(2);
  WanLink link(layout.inter, WanModel{1.0, 50.0, false, 2, 2});
  HierarchicalAllreduce reducer(layout.intra, link);
  for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{1000}, size_t{1001}, size_t{4099}}) {
    // Identical inside a dc, different across dcs, not exactly summable in bf16.
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) {
      data[i] = std::sin(0.37F * static_cast<float>(i) + static_cast<float>(layout.topo.dc)) /
                static_cast<float>(1 + layout.topo.dc);
    }
    std::vector<float> expected = data;
    MPI_Allreduce(MPI_IN_PLACE, expected.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  layout.inter.handle());
    double scalars[2] = {1.0 + layout.topo.dc, 1e-9 * (layout.topo.dc + 1)};

    std::vector<float> got = data;
    reducer.allreduce_sum(got.data(), n, scalars, 2, WireCodec{});
    INFO("n = " << n);
    CHECK(got == expected);
    CHECK(scalars[0] == 3.0);
    CHECK(scalars[1] == Approx(3e-9).epsilon(1e-12));

    std::vector<float> half = data;
    double none[1] = {0.0};
    reducer.allreduce_sum(half.data(), n, none, 0, WireCodec{WireFormat::bf16});
    for (size_t i = 0; i < n; ++i) {
      // Each dc's value and the sum are rounded to bf16 once: 2 x 2^-9 relative, and a little
      // absolute slack for sums that cancel.
      CHECK(std::fabs(half[i] - expected[i]) <= 4e-3F * (std::fabs(data[i]) + 1e-3F) + 1e-2F);
    }
    const torch::Tensor result = torch::from_blob(got.data(), {static_cast<int64_t>(n)});
    CHECK(identical_on_all_ranks(result));
  }
}

TEST_CASE("WAN model: accounted time and bytes follow the formula for the bytes sent",
          "[np=4][multi_dc]") {
  Layout layout(2);
  const WanModel model{0.5, 20.0, false, 2, 2};
  WanLink link(layout.inter, model);
  HierarchicalAllreduce reducer(layout.intra, link);
  const size_t n = 1001;  // shards of 501 floats
  std::vector<float> data(n, 1.0F);
  double scalars[3] = {1.0, 2.0, 3.0};
  reducer.allreduce_sum(data.data(), n, scalars, 3, WireCodec{});
  reducer.allreduce_sum(data.data(), n, scalars, 3, WireCodec{});
  // One message per member: 501 floats padded to 8 bytes (2008), then 3 doubles.
  const size_t message = 2008 + 24;
  CHECK(link.messages() == 2);
  CHECK(link.dc_bytes() == 2 * 2 * static_cast<int64_t>(message));
  // The ring of 2 dcs cuts each member's 501 floats into chunk 0 (251 floats and the 3 scalars,
  // packed: 1008 + 24 bytes) and chunk 1 (250 floats, sent raw: 1000 bytes); every rank sends
  // one of them in each of the 2 phases.
  const LinkTraffic t = link.last_traffic();
  CHECK(t.sent_bytes == 1032 + 1000);
  CHECK(t.phases == 2);
  CHECK(t.critical_bytes == 2 * 1032);
  CHECK(t.all_bytes == 2 * (1032 + 1000));
  CHECK(link.traffic(501, WireCodec{}, 3).sent_bytes == t.sent_bytes);
  CHECK(link.sent_bytes() == 2 * 2 * 2 * (1032 + 1000));  // 2 syncs x 2 members x both dcs
  // Each phase: the latency, then both members' largest message over B (bytes/s).
  const double per_sync = 2 * (20e-3 + 2.0 * 1032 / (0.5e9 / 8));
  CHECK(link.link_seconds() == Approx(2 * per_sync).epsilon(1e-12));
  CHECK(model.seconds(t) == Approx(per_sync).epsilon(1e-12));
}

TEST_CASE("diloco across 2 dcs: replicas agree in each dc every step, anchors every round",
          "[np=4][multi_dc]") {
  const SharedCorpus corpus("agree");
  Config config = corpus.config(2);
  config.interval.H = 3;
  config.run.steps = 13;  // four rounds of 3 and a last one of 1
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  const Topology& topo = trainer.topology();
  MPI_Comm dc = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, topo.dc, topo.member, &dc);
  int rounds = 0;
  bool dcs_diverged = false;
  for (int step = 1; step <= 13; ++step) {
    const StepResult r = trainer.train_step();
    INFO("after step " << step);
    REQUIRE(identical_across(trainer.params().values(), dc));
    if (r.round) {
      ++rounds;
      REQUIRE(identical_on_all_ranks(trainer.anchor()));
      REQUIRE(torch::equal(trainer.params().values(), trainer.anchor()));
      CHECK(r.round->round == rounds);
      CHECK(r.round->H == (step == 13 ? 1 : 3));
      CHECK(std::isfinite(r.round->rho));
    } else {
      dcs_diverged = dcs_diverged || !identical_on_all_ranks(trainer.params().values());
    }
  }
  MPI_Comm_free(&dc);
  CHECK(rounds == 5);
  CHECK(trainer.rounds() == 5);
  CHECK(dcs_diverged);  // between rounds the dcs train on different data
}

TEST_CASE("ddp across 2 dcs: every replica of the world stays identical", "[np=4][multi_dc]") {
  const SharedCorpus corpus("ddp");
  Config config = corpus.config(2);
  config.outer.method = "ddp";
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  for (int step = 1; step <= 5; ++step) {
    trainer.train_step();
    INFO("after step " << step);
    REQUIRE(identical_on_all_ranks(trainer.params().values()));
  }
  CHECK(trainer.rounds() == 5);
  // Each step every member sends its shard of the gradient over the link.
  const size_t shard =
      HierarchicalAllreduce::shard_size(static_cast<size_t>(trainer.params().numel()), 2);
  CHECK(trainer.wan().dc_bytes() ==
        5 * 2 * static_cast<int64_t>(PackedLayout{shard, DType::f32, 0}.bytes()));
}

TEST_CASE("sign check: inner SGD, H 1, outer SGD lr 1 without momentum is synchronous SGD",
          "[np=4][multi_dc]") {
  const SharedCorpus corpus("sign");
  Config base = corpus.config(2);
  base.inner.optimizer = "sgd";
  base.inner.lr = 0.5;
  base.inner.grad_clip = 0.0;  // ddp would clip the world's gradient, diloco each dc's
  base.run.steps = 6;
  Config sync_sgd = base;
  sync_sgd.outer.method = "ddp";
  Config diloco = base;
  diloco.outer.method = "diloco";
  diloco.interval.H = 1;
  diloco.outer.lr = 1.0;
  diloco.outer.momentum = 0.0;
  Trainer reference(sync_sgd, MPI_COMM_WORLD, {false, false});
  Trainer outer(diloco, MPI_COMM_WORLD, {false, false});
  REQUIRE(torch::equal(reference.params().values(), outer.params().values()));
  for (int step = 1; step <= 6; ++step) {
    const torch::Tensor before = reference.params().values().clone();
    reference.train_step();
    outer.train_step();
    const double moved = max_abs_diff(reference.params().values(), before);
    const double diff = max_abs_diff(reference.params().values(), outer.params().values());
    INFO("step " << step << ": the step moved parameters by up to " << moved
                 << ", the two methods differ by " << diff);
    // Equal up to fp32 rounding of θ − (θ − α g); a flipped sign would differ by 2 α g.
    REQUIRE(moved > 1e-3);
    REQUIRE(diff <= 1e-6);
  }
}

TEST_CASE("diloco across 2 dcs matches a single-process reference of the algorithm",
          "[np=4][multi_dc]") {
  const SharedCorpus corpus("reference");
  Config config = corpus.config(2);
  config.interval.H = 4;
  config.run.steps = 12;
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  for (int step = 0; step < 12; ++step)
    trainer.train_step();
  REQUIRE(trainer.rounds() == 3);
  const torch::Tensor expected = reference_diloco(config, 12).anchor;
  const double moved = max_abs_diff(expected, reference_diloco(config, 0).anchor);
  const double diff = max_abs_diff(trainer.anchor(), expected);
  INFO("the anchor moved by up to " << moved << "; trainer and reference differ by " << diff);
  // Stated tolerance: 1e-4, a thousandth of the anchor's movement (~1e-1). The two differ only
  // by fp32 rounding (fused and unfused forms of the same updates), which AdamW's normalised
  // steps carry from round to round (~1e-5 after three rounds); a flipped sign, a lost momentum
  // or a wrong average moves the anchor by ~1e-1.
  CHECK(moved > 1e-2);
  CHECK(diff <= 1e-4);
}

TEST_CASE("diloco with Muon inner steps across 2 dcs matches the single-process reference",
          "[np=4][multi_dc][muon]") {
  const SharedCorpus corpus("reference_muon");
  Config config = corpus.config(2);
  config.interval.H = 4;
  config.run.steps = 8;
  config.inner.optimizer = "muon";
  config.inner.muon_lr = 2.0 * config.inner.lr;
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  for (int step = 0; step < 8; ++step)
    trainer.train_step();
  REQUIRE(trainer.rounds() == 2);
  const torch::Tensor expected = reference_diloco(config, 8).anchor;
  Config adamw = config;
  adamw.inner.optimizer = "adamw";
  const double other = max_abs_diff(expected, reference_diloco(adamw, 8).anchor);
  const double diff = max_abs_diff(trainer.anchor(), expected);
  INFO("Muon and AdamW anchors differ by " << other << "; trainer and reference by " << diff);
  // The reference steps the library's FlatMuon (checked against Muon written out in the unit
  // tests): this checks the trainer's wiring (the matrices, muon_lr, clipping, the schedule).
  CHECK(other > 1e-2);
  CHECK(diff <= 1e-5);
}

TEST_CASE("top-k int2 with error feedback across 2 dcs x 2 members matches the reference",
          "[np=4][multi_dc][sparse]") {
  const SharedCorpus corpus("reference_sparse");
  Config config = corpus.config(2);
  config.interval.H = 3;
  config.run.steps = 12;
  config.outer.wire_dtype = "int2";
  config.outer.wire_topk = 0.05;
  config.outer.wire_topk_chunk = 256;
  config.outer.error_feedback = true;
  config.outer.error_feedback_beta = 0.9;
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  for (int step = 0; step < 12; ++step)
    trainer.train_step();
  REQUIRE(trainer.rounds() == 4);
  const torch::Tensor expected = reference_diloco(config, 12).anchor;
  Config forgetful = config;  // the mutation: error feedback that keeps nothing
  forgetful.outer.error_feedback_beta = 0.0;
  const double mutated = max_abs_diff(expected, reference_diloco(forgetful, 12).anchor);
  const double diff = max_abs_diff(trainer.anchor(), expected);
  INFO("with beta 0 the reference moves by " << mutated << "; trainer and reference differ by "
                                             << diff);
  // The same operations in the same order (Δ + β e, the codec, the dcs' decodings summed in dc
  // order): equal up to AdamW's fp32 rounding, which a top-k boundary could amplify to a whole
  // int2 step of one value (its chunk's scale, ~1e-3).
  CHECK(mutated > 1e-3);
  CHECK(diff <= 1e-5);
}

TEST_CASE("diloco train() writes one syncs.jsonl line per round and the inter-dc figures",
          "[np=4][multi_dc]") {
  const SharedCorpus corpus("syncs");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Config config = corpus.config(2);
  config.interval.H = 4;
  config.run.steps = 10;  // rounds of 4, 4 and 2
  config.run.eval_every = 5;
  Trainer trainer(config, MPI_COMM_WORLD, {true, false});
  const TrainSummary s = trainer.train();
  CHECK(s.rounds == 3);
  CHECK(s.h_per_round == std::vector<int64_t>{4, 4, 2});
  const size_t shard =
      HierarchicalAllreduce::shard_size(static_cast<size_t>(trainer.params().numel()), 2);
  // Each round every member of both dcs sends its shard and the round's scalars.
  const auto message =
      static_cast<int64_t>(PackedLayout{shard, DType::f32, OuterSync::message_scalars(2)}.bytes());
  CHECK(s.inter_dc_bytes == 3 * 2 * 2 * message);
  CHECK(s.link_s ==
        Approx(3 * trainer.wan().seconds(shard, WireCodec{}, OuterSync::message_scalars(2))));
  CHECK(s.sim_time_s >= s.link_s);
  CHECK(s.compute_utilisation > 0.0);
  CHECK(s.compute_utilisation < 1.0);
  if (rank == 0) {
    const std::string run = corpus.dir + "/runs/run";
    std::ifstream syncs(run + "/syncs.jsonl");
    std::vector<std::string> lines;
    for (std::string line; std::getline(syncs, line);)
      lines.push_back(line);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].rfind("{\"round\":1,\"step\":4,\"H\":4,", 0) == 0);
    CHECK(lines[2].find("\"step\":10,\"H\":2,") != std::string::npos);
    CHECK(lines[1].find("\"rho\":") != std::string::npos);
    std::ifstream summary(run + "/summary.json");
    std::stringstream text;
    text << summary.rdbuf();
    CHECK(text.str().find("\"rounds\":3,") != std::string::npos);
    CHECK(text.str().find("\"method\":\"diloco\"") != std::string::npos);
    CHECK(text.str().find("\"h_per_round\":[4,4,2]") != std::string::npos);
    // Evaluations wait for a round's end (steps 5 and 10 -> at steps 8 and 10).
    std::ifstream metrics(run + "/metrics.jsonl");
    int evals = 0;
    for (std::string line; std::getline(metrics, line);) {
      if (line.find("\"eval_loss\"") != std::string::npos) {
        ++evals;
        CHECK((line.find("\"step\":8,") != std::string::npos ||
               line.find("\"step\":10,") != std::string::npos));
      }
    }
    CHECK(evals == 2);
  }
}
