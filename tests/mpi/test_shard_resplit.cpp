// A checkpoint of a sharded run resumes onto another ranks_per_dc (--allow-topology-change,
// train/topology_change.hpp): 2 dcs of 2 members (the world's first four ranks, shard
// optimizer) go on as 2 dcs of 3 (shard gradients: the moments, outer state and residuals
// re-split 3 ways, an uneven split) and then as 2 dcs of 2 again (shard none), with AdamW, two
// fragments and an int4 wire with error feedback. At each resume the anchor and the replicas
// are the checkpoint's bit for bit; the run ends near the uninterrupted one (the new member
// reads fresh data, so not bitwise), and without the flag the resume is refused.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include <mpi.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "../support/resume_check.hpp"
#include "../support/run_files.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/checkpoint_readers.hpp"
#include "autoloco/ckpt/whole_vectors.hpp"

using namespace autoloco;
using test::run_dir;
using test::SharedCorpus;

namespace {

int rank_of_world() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

Config resplit_config(const SharedCorpus& corpus, const std::string& name, int members,
                      const std::string& shard) {
  Config c = corpus.config(members);
  c.run.name = name;
  c.run.steps = 36;
  c.run.eval_every = 12;
  c.topology.shard = shard;
  c.interval.H = 6;
  c.outer.momentum = 0.8;
  c.model.n_layer = 2;
  c.outer.fragments = 2;
  c.outer.wire_dtype = "int4";
  c.outer.error_feedback = true;
  c.ckpt.every_minutes = 0;
  return c;
}

TrainerOptions options(const std::string& resume, bool allow, int64_t stop_at) {
  TrainerOptions o;
  o.print_progress = false;
  o.resume = resume;
  o.allow_topology_change = allow;
  o.stop_at_step = stop_at;
  return o;
}

std::vector<float> values(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

// The checkpoint's anchor and the replica of dc `dc`, whatever layout wrote them.
std::pair<std::vector<float>, std::vector<float>> saved_state(const std::string& ckpt, int dc) {
  const Manifest m = read_manifest(ckpt);
  CheckpointReaders files(ckpt, m);
  const WholeVectors v = whole_vectors(files, m);
  return {v.at({kGlobalFile, "outer/anchor"}), files.open(dc_file(dc)).read_f32("replica/values")};
}

// The world's first four ranks (MPI_COMM_NULL on the others).
MPI_Comm first_four() {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank_of_world() < 4 ? 0 : MPI_UNDEFINED, rank_of_world(), &comm);
  return comm;
}

// Runs on `comm` (every rank of it): a resume of `from` (or a new run), to `stop_at` (-1: the
// end). Checks that the resumed state is the checkpoint's. Returns the final eval loss.
double leg(const Config& c, MPI_Comm comm, const std::string& from, int64_t stop_at) {
  Trainer t(c, comm, options(from, !from.empty(), stop_at));
  if (!from.empty()) {
    const auto [anchor, replica] = saved_state(from, t.topology().dc);
    CHECK(values(t.anchor()) == anchor);
    CHECK(values(t.params().values()) == replica);
  }
  return t.train().final_eval_loss;
}

}  // namespace

TEST_CASE("a sharded checkpoint resumes onto 3 members per dc and back onto 2",
          "[np=6][resume][shard]") {
  const SharedCorpus corpus("shard-resplit");
  const std::string ckpts = corpus.dir + "/runs/cut/checkpoints/";
  MPI_Comm four = first_four();
  double reference = NAN;
  if (four != MPI_COMM_NULL) {
    reference = leg(resplit_config(corpus, "ref", 2, "optimizer"), four, "", -1);
    leg(resplit_config(corpus, "cut", 2, "optimizer"), four, "", 12);
  }
  MPI_Bcast(&reference, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  const Config three = resplit_config(corpus, "cut", 3, "gradients");
  {
    TrainerOptions o = options(ckpts + checkpoint_name(12), false, -1);
    CHECK_THROWS_WITH(Trainer(three, MPI_COMM_WORLD, o),
                      Catch::Contains("without --allow-topology-change") &&
                          Catch::Contains("ranks_per_dc 2 -> 3"));
  }
  leg(three, MPI_COMM_WORLD, ckpts + checkpoint_name(12), 24);
  if (rank_of_world() == 0) {
    // The sharded checkpoint's members wrote their own shards: pieces in their rank files.
    const H5Reader k(ckpts + checkpoint_name(24) + "/" + rank_file(5));
    CHECK(k.has("adamw/exp_avg_ranges"));
    CHECK(k.has("residual/0_ranges"));
    CHECK_FALSE(H5Reader(ckpts + checkpoint_name(24) + "/" + kGlobalFile).has("outer/anchor"));
  }

  double resplit = NAN;
  if (four != MPI_COMM_NULL) {
    resplit = leg(resplit_config(corpus, "cut", 2, "none"), four, ckpts + checkpoint_name(24), -1);
    MPI_Comm_free(&four);
  }
  MPI_Bcast(&resplit, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  INFO("eval loss at step 36: uninterrupted " << reference << ", re-split twice " << resplit);
  CHECK(std::isfinite(resplit));
  CHECK(std::fabs(resplit - reference) < 0.02);  // 0.003 measured
  if (rank_of_world() == 0) {
    const std::string summary = test::read_text(corpus.dir + "/runs/cut/summary.json");
    CHECK(summary.find(R"("from_ranks_per_dc":3,"to_ranks_per_dc":2)") != std::string::npos);
  }
}
