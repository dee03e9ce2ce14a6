// AdLoCo across datacenters (2 and 4 ranks): the outer average and the round's agreement weigh
// dcs by their tokens, each dc's batch grows from its own gradient samples (per member in dcs of
// 2 ranks, the two halves of the batch in dcs of one rank), the run ends at the tokens of
// run.steps initial steps, and a run stopped in the middle of a round resumes bitwise equal with
// the batch state restored.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/train/outer_sync.hpp"
#include "autoloco/train/trainer.hpp"

using namespace autoloco;
using test::check_same_state;
using test::lines_without_clock;
using test::run;
using test::run_dir;
using test::SharedCorpus;
using test::world_rank;

namespace {

struct Vector : torch::nn::Module {
  torch::Tensor w;
  explicit Vector(int64_t n) { w = register_parameter("w", torch::zeros({n})); }
};

Config adloco_config(const SharedCorpus& corpus, int ranks_per_dc, const std::string& name) {
  Config c = corpus.config(ranks_per_dc);
  c.run.name = name;
  c.run.steps = 48;
  c.run.eval_every = 12;
  c.run.log_every = 3;
  c.inner.warmup_steps = 4;
  c.interval.H = 4;
  c.data.batch_size = 2;
  c.batch.controller = "adloco";
  c.batch.theta = 0.05;  // asks for far more than the gradient noise needs: grows every round
  c.batch.max_growth = 1.5;
  c.batch.max_batch = 6;
  c.batch.max_micro_batch = 2;  // above 2 sequences per rank the step accumulates
  c.batch.lr_scaling = "sqrt";
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  return c;
}

}  // namespace

TEST_CASE("the outer average weighs each dc's pseudo-gradient by its tokens", "[np=4][adloco]") {
  // 4 dcs of one rank, outer local_sgd (lr 1, no momentum): the new anchor is exactly the
  // token-weighted mean of the replicas.
  const Topology topo = Topology::from_world(MPI_COMM_WORLD, 1);
  MpiCommunicator intra(MPI_COMM_WORLD, topo.dc, topo.member);
  MpiCommunicator inter(MPI_COMM_WORLD, topo.member, topo.dc);
  WanLink link(inter, WanModel{1.0, 50.0, false, topo.num_dcs, 1});
  HierarchicalAllreduce reducer(intra, link);
  Vector module(5);
  FlatParams params(module);
  Config c = parse_config("", {"outer.method=local_sgd"});
  const FragmentPlan whole(params.numel());
  OuterSync sync(c.outer, 4, params, whole, 0, reducer, link, torch::kCPU);
  const torch::Tensor anchor = sync.anchor().clone();
  auto replica = [&](int dc) { return anchor + torch::arange(5).to(torch::kFloat) * (dc + 1.0F); };
  {
    torch::NoGradGuard no_grad;
    params.values().copy_(replica(topo.dc));
  }
  RoundInput in;
  in.round = 1;
  in.H = 4;
  in.loss = 1.0;
  in.tokens = 100.0 * (topo.dc + 1);  // dc d ran a batch d + 1 times the first one's
  in.nominal_tokens = 100.0;
  in.dc = topo.dc;
  in.next_batch = 8.0 * (topo.dc + 1);
  in.demand = topo.dc == 2 ? std::nan("") : 3.5 * topo.dc;
  const RoundStats s = sync.sync(params, in);

  torch::Tensor expected = torch::zeros({5});
  for (int d = 0; d < 4; ++d)
    expected += replica(d) * static_cast<float>(d + 1) / 10.0F;
  CHECK(torch::allclose(sync.anchor(), expected, 1e-6, 1e-6));
  CHECK(torch::equal(params.values(), sync.anchor()));
  CHECK(s.tokens == 1000.0);
  CHECK(s.next_batch == std::vector<double>{8.0, 16.0, 24.0, 32.0});
  REQUIRE(s.demand.size() == 4);
  CHECK(s.demand[1] == 3.5);
  CHECK(std::isnan(s.demand[2]));
}

TEST_CASE("the round's agreement weighs the dcs as the average does", "[np=2][adloco]") {
  // 2 dcs of one rank with tokens 1 : 3. Orthogonal pseudo-gradients agree 0 (unweighted norms
  // against the weighted mean read 0.25), identical ones 1.
  const Topology topo = Topology::from_world(MPI_COMM_WORLD, 1);
  MpiCommunicator intra(MPI_COMM_WORLD, topo.dc, topo.member);
  MpiCommunicator inter(MPI_COMM_WORLD, topo.member, topo.dc);
  WanLink link(inter, WanModel{1.0, 50.0, false, topo.num_dcs, 1});
  HierarchicalAllreduce reducer(intra, link);
  Vector module(3);
  FlatParams params(module);
  const Config c = parse_config("", {"outer.method=local_sgd"});
  const FragmentPlan whole(params.numel());
  OuterSync sync(c.outer, 4, params, whole, 0, reducer, link, torch::kCPU);
  auto round = [&](const torch::Tensor& delta, double tokens) {
    {
      torch::NoGradGuard no_grad;
      params.values().copy_(sync.anchor() - delta);
    }
    RoundInput in;
    in.round = 1;
    in.H = 4;
    in.loss = 1.0;
    in.tokens = tokens;
    in.nominal_tokens = 100.0;
    in.dc = topo.dc;
    return sync.sync(params, in);
  };
  const torch::Tensor e = torch::eye(3)[topo.dc];
  const double tokens = 100.0 * (2 * topo.dc + 1);
  const RoundStats orthogonal = round(e, tokens);
  CHECK(orthogonal.rho == Approx(0.0).margin(1e-6));
  CHECK(orthogonal.effective_dcs == Approx(1.6));
  CHECK(round(torch::tensor({0.5F, -1.0F, 2.0F}), tokens).rho == Approx(1.0).epsilon(1e-6));
  // Equal tokens: DiLoCo's statistic, exactly.
  const RoundStats equal = round(e * (topo.dc + 1.0), 100.0);
  CHECK(equal.effective_dcs == 2.0);
  CHECK(equal.mean_delta_sq == Approx(2.5));
  CHECK(equal.rho == (2 * equal.avg_delta_sq - equal.mean_delta_sq) / equal.mean_delta_sq);
}

TEST_CASE("adloco: each dc of one rank grows its batch from the halves of its batch",
          "[np=4][adloco]") {
  const SharedCorpus corpus("adloco-halves");
  Config c = adloco_config(corpus, 1, "halves");
  c.batch.test = "inner_product";
  c.batch.nu = 0.05;
  c.batch.vartheta = 0.05;
  Trainer trainer(c, MPI_COMM_WORLD, {true, false});
  CHECK(trainer.batch_plan().accum == 2);  // two halves of one sequence each
  const TrainSummary s = trainer.train();
  // Equal tokens: the run stops once it has the tokens of 48 steps at the initial batch, in
  // fewer steps since the batch grew.
  const int64_t initial = 4 * 2 * c.model.seq_len;
  CHECK(s.tokens >= 48 * initial);
  CHECK(s.tokens < 48 * initial + trainer.tokens_per_step());
  CHECK(s.steps < 48);
  CHECK(*std::max_element(s.final_batch.begin(), s.final_batch.end()) > 2);
  CHECK(trainer.progress_step() == 48);
  if (world_rank() == 0) {
    std::ifstream syncs(run_dir(c) + "/syncs.jsonl");
    std::string first;
    std::getline(syncs, first);
    CHECK(first.find("\"batch\":[2,2,2,2]") != std::string::npos);
    CHECK(first.find("\"batch_demand\":[") != std::string::npos);
    CHECK(first.find("\"batch_demand\":[null") == std::string::npos);
  }
}

TEST_CASE("adloco: a run stopped in the middle of a round resumes bitwise equal",
          "[np=4][adloco][resume]") {
  const SharedCorpus corpus("adloco-resume");
  const Config ref = adloco_config(corpus, 2, "reference");
  const TrainSummary full = run(ref);
  REQUIRE(full.steps < 48);
  // The batch grew (2 -> 3 -> 4 -> 6 sequences per rank): steps of one, two and three
  // micro-batches.
  REQUIRE(full.final_batch == std::vector<int64_t>{12, 12});

  const Config cut = adloco_config(corpus, 2, "cut");
  const int64_t stop = 13;  // round 4 (steps 13 to 16) runs 2 micro-batches per step
  REQUIRE(stop % ref.interval.H != 0);
  const TrainSummary first = run(cut, "", stop);
  CHECK(first.steps == stop);
  const TrainSummary rest = run(cut, "auto");
  CHECK(rest.steps == full.steps);
  CHECK(rest.tokens == full.tokens);
  MPI_Barrier(MPI_COMM_WORLD);
  test::check_same_run(ref, cut, full.steps);
}

TEST_CASE("multi-instance: 3 instances per rank merge to one and a stopped run resumes exactly",
          "[np=4][adloco][instances][resume]") {
  const SharedCorpus corpus("adloco-instances");
  auto config = [&](const std::string& name) {
    Config c = adloco_config(corpus, 2, name);
    c.batch.instances = 3;
    c.batch.merge_every = 2;  // merges after rounds 2 and 4
    c.batch.max_batch = 4;
    return c;
  };
  const Config ref = config("reference");
  {
    Trainer trainer(ref, MPI_COMM_WORLD, {true, false});
    CHECK(trainer.instances() == 3);
    // Three instances of 2 sequences per rank: 12 sequences per dc and step.
    CHECK(trainer.tokens_per_step() == 2 * 2 * 3 * 2 * ref.model.seq_len);
    const TrainSummary s = trainer.train();
    CHECK(trainer.instances() == 1);
    // The merged instance holds the three batches' sum, grown within max_batch each.
    CHECK(trainer.batch_plan().batch >= 6);
    CHECK(s.tokens >= 48 * 2 * 2 * 3 * 2 * ref.model.seq_len);
  }
  const Config cut = config("cut");
  const int64_t stop = 6;  // in round 2, before the first merge: all three instances saved
  const TrainSummary first = run(cut, "", stop);
  CHECK(first.steps == stop);
  const TrainSummary rest = run(cut, "auto");
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string last = "/checkpoints/" + checkpoint_name(rest.steps);
  check_same_state(run_dir(ref) + last, run_dir(cut) + last);
  if (world_rank() == 0) {
    CHECK(lines_without_clock(run_dir(ref) + "/syncs.jsonl") ==
          lines_without_clock(run_dir(cut) + "/syncs.jsonl"));
    // The checkpoint at the stop held all three instances.
    const H5Reader dc0(run_dir(cut) + "/checkpoints/" + checkpoint_name(stop) + "/" + dc_file(0));
    CHECK(dc0.read_i64("instances/active") == std::vector<int64_t>{0, 1, 2});
    CHECK(dc0.has("instance_2/adamw/exp_avg"));
  }
}

// With fragments (outer.fragments 2, H 4: fragment 1 after steps 2, 6, ..., fragment 0 after 4,
// 8, ...) the batch changes only at a cycle's end: fragment 1's messages carry the current
// batch, and each sync weighs the dcs by the tokens of its own period.
TEST_CASE("adloco with fragments: batches change at cycle ends and a stop resumes exactly",
          "[np=4][adloco][fragments][resume]") {
  const SharedCorpus corpus("adloco-fragments");
  auto config = [&](const std::string& name) {
    Config c = adloco_config(corpus, 2, name);
    c.outer.fragments = 2;
    return c;
  };
  const Config ref = config("reference");
  const TrainSummary full = run(ref);
  CHECK(full.final_batch != std::vector<int64_t>{4, 4});  // it grew from 2 per rank
  const Config cut = config("cut");
  const int64_t stop = 13;  // after fragment 0's sync at 12, before fragment 1's at 14
  CHECK(run(cut, "", stop).steps == stop);
  const TrainSummary rest = run(cut, "auto");
  CHECK(rest.steps == full.steps);
  CHECK(rest.tokens == full.tokens);
  MPI_Barrier(MPI_COMM_WORLD);
  test::check_same_run(ref, cut, full.steps);
  if (world_rank() != 0) return;
  std::ifstream syncs(run_dir(ref) + "/syncs.jsonl");
  int fragment_syncs = 0;
  for (std::string line; std::getline(syncs, line);) {
    if (line.find("\"fragment\":1") == std::string::npos) continue;
    ++fragment_syncs;
    const auto list = [&](const std::string& key) {
      const size_t at = line.find("\"" + key + "\":[");
      return line.substr(at + key.size() + 3, line.find(']', at) - at - key.size() - 3);
    };
    INFO(line);
    CHECK(list("next_batch") == list("batch"));
  }
  CHECK(fragment_syncs >= 6);
}
