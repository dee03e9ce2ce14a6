// Resume onto another number of dcs (--allow-topology-change, train/topology_change.hpp): a run
// of 4 dcs goes on with 3 (ranks 0-2 of the world) and then with 4 again. The anchor and outer
// momentum carry over exactly, each dc continues its source dc's replica, the loss keeps
// falling, the summary says what was mapped, and without the flag the resume is refused saying
// what would change. The same topology still resumes bitwise (as tests/mpi/test_resume.cpp).
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include <mpi.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/resume_check.hpp"
#include "../support/run_files.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using test::run_dir;
using test::SharedCorpus;
using test::world_rank;

namespace {

Config elastic_config(const SharedCorpus& corpus, const std::string& name, int64_t steps) {
  Config c = corpus.config(1);  // one rank per dc: 4 dcs on the world
  c.run.name = name;
  c.run.steps = steps;
  c.run.eval_every = 8;
  c.run.log_every = 4;
  c.interval.H = 4;
  c.outer.momentum = 0.8;
  c.ckpt.every_minutes = 0;
  return c;
}

TrainerOptions resume_from(const std::string& path, bool allow) {
  TrainerOptions o;
  o.print_progress = false;
  o.resume = path;
  o.allow_topology_change = allow;
  return o;
}

std::vector<float> saved(const std::string& checkpoint, const std::string& file,
                         const std::string& dataset) {
  return H5Reader(checkpoint + "/" + file).read_f32(dataset);
}

std::vector<float> values(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

// The world's first three ranks (MPI_COMM_NULL on the fourth).
MPI_Comm first_three() {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() < 3 ? 0 : MPI_UNDEFINED, world_rank(), &comm);
  return comm;
}

}  // namespace

TEST_CASE("resume onto 3 dcs and back onto 4 carries the anchor and the loss keeps falling",
          "[np=4][resume]") {
  const SharedCorpus corpus("topology-change");
  const Config four = elastic_config(corpus, "elastic", 16);
  const TrainSummary first = test::run(four);
  const std::string at16 = run_dir(four) + "/checkpoints/" + checkpoint_name(16);

  MPI_Comm three = first_three();
  double second_loss = 0.0;
  if (three != MPI_COMM_NULL) {
    const Config c = elastic_config(corpus, "elastic", 32);
    CHECK_THROWS_WITH(Trainer(c, three, resume_from(at16, false)),
                      Catch::Contains("without --allow-topology-change") &&
                          Catch::Contains("4 dcs -> 3: dc 0 <- 0, dc 1 <- 1, dc 2 <- 2; dc 3 "
                                          "dropped"));
    Trainer t(c, three, resume_from(at16, true));
    CHECK(t.step() == 16);
    CHECK(values(t.anchor()) == saved(at16, kGlobalFile, "outer/anchor"));
    const int dc = t.topology().dc;
    CHECK(values(t.params().values()) == saved(at16, dc_file(dc), "replica/values"));
    const TrainSummary s = t.train();
    CHECK(s.steps == 32);
    second_loss = s.final_eval_loss;
    CHECK(second_loss < first.final_eval_loss);
    MPI_Comm_free(&three);
  }
  MPI_Bcast(&second_loss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (world_rank() == 0) {
    const std::string summary = test::read_text(run_dir(four) + "/summary.json");
    CHECK(summary.find(R"("topology_change":{"from_dcs":4,"to_dcs":3,"source_dc":[0,1,2])") !=
          std::string::npos);
  }

  // Back onto 4: dc 3 continues dc 0's replica with a fresh data stream.
  const std::string at32 = run_dir(four) + "/checkpoints/" + checkpoint_name(32);
  const Config again = elastic_config(corpus, "elastic", 48);
  Trainer t(again, MPI_COMM_WORLD, resume_from(at32, true));
  CHECK(t.step() == 32);
  CHECK(values(t.anchor()) == saved(at32, kGlobalFile, "outer/anchor"));
  CHECK(values(t.params().values()) == saved(at32, dc_file(t.topology().dc % 3), "replica/values"));
  const TrainSummary third = t.train();
  CHECK(third.steps == 48);
  CHECK(third.final_eval_loss < second_loss);
  if (world_rank() == 0) {
    const std::string summary = test::read_text(run_dir(four) + "/summary.json");
    CHECK(summary.find(R"("fresh_streams":[3])") != std::string::npos);
  }
}

TEST_CASE("resume onto the same 4 dcs needs no flag and stays bitwise", "[np=4][resume]") {
  const SharedCorpus corpus("topology-same");
  const Config ref = elastic_config(corpus, "straight", 16);
  test::run(ref);
  Config cut = elastic_config(corpus, "cut", 16);
  test::run(cut, "", 8);
  test::run(cut, "auto");
  test::check_same_run(ref, cut, 16);
}
