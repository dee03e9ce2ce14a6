// One datacenter of several ranks: replicas stay bitwise identical and the loss falls.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/shared_corpus.hpp"
#include "autoloco/util/signals.hpp"

using namespace autoloco;

using test::identical_on_all_ranks;
using test::SharedCorpus;

TEST_CASE("single dc: replicas stay bitwise identical after every step", "[np=2][single_dc]") {
  const SharedCorpus corpus("replicas");
  Config config = corpus.config();
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  REQUIRE(identical_on_all_ranks(trainer.params().values()));
  for (int step = 0; step < 12; ++step) {
    trainer.train_step();
    INFO("after step " << step + 1);
    REQUIRE(identical_on_all_ranks(trainer.params().values()));
  }
}

TEST_CASE("single dc: members read different data so their local losses differ",
          "[np=2][single_dc]") {
  const SharedCorpus corpus("streams");
  Config config = corpus.config();
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  double loss = trainer.train_step().loss;
  double max_loss = loss;
  double min_loss = loss;
  MPI_Allreduce(MPI_IN_PLACE, &max_loss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &min_loss, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  CHECK(max_loss > min_loss);
}

TEST_CASE("single dc: the training and eval loss fall", "[np=2][single_dc]") {
  const SharedCorpus corpus("falls");
  Config config = corpus.config();
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  const double eval_before = trainer.evaluate();
  double first = 0.0;
  double last = 0.0;
  for (int step = 0; step < 60; ++step) {
    const double loss = trainer.train_step().loss;
    if (step < 5) first += loss / 5;
    if (step >= 55) last += loss / 5;
  }
  const double eval_after = trainer.evaluate();
  INFO("train loss " << first << " -> " << last << ", eval " << eval_before << " -> "
                     << eval_after);
  // Uniform over 256 bytes is ln 256 = 5.55; the tiny corpus is learnable far below that.
  CHECK(eval_before > 5.0);
  CHECK(last < 0.6 * first);
  CHECK(eval_after < 2.5);
}

TEST_CASE("single dc: train() writes metrics and a summary into the run directory",
          "[np=2][single_dc]") {
  const SharedCorpus corpus("rundir");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string& dir = corpus.dir;
  Config config = corpus.config();
  config.run.steps = 20;
  config.run.eval_every = 10;
  Trainer trainer(config, MPI_COMM_WORLD, {true, false});
  const TrainSummary s = trainer.train();
  CHECK(s.steps == 20);
  CHECK(s.tokens == 20 * 4 * 32 * config.topology.ranks_per_dc);
  CHECK(std::isfinite(s.final_eval_loss));
  if (rank == 0) {
    const std::string run = dir + "/runs/run";
    CHECK(std::filesystem::exists(run + "/config.yaml"));
    CHECK(std::filesystem::exists(run + "/summary.json"));
    std::ifstream metrics(run + "/metrics.jsonl");
    int lines = 0;
    for (std::string line; std::getline(metrics, line);)
      ++lines;
    CHECK(lines == 2 + 2);  // train lines at steps 10, 20; eval lines at 10, 20
    // The saved config is the effective one and loads back.
    CHECK(to_yaml(load_config(run + "/config.yaml")) == to_yaml(config));
  }
}

TEST_CASE("single dc: a stop request on one rank stops every rank at the same step",
          "[np=2][single_dc]") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  StopAgreement stop(MPI_COMM_WORLD);
  int stopped_at = -1;
  for (int step = 0; step < 20; ++step) {
    if (stop.poll(rank == 1 && step == 7)) {
      stopped_at = step;
      break;
    }
  }
  stop.drain();
  CHECK(stopped_at == 8);
}

TEST_CASE("single dc: a signal on one rank ends train() cleanly on every rank at the same step",
          "[np=2][single_dc]") {
  const SharedCorpus corpus("signal");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string& dir = corpus.dir;
  Config config = corpus.config();
  Trainer trainer(config, MPI_COMM_WORLD, {true, false});
  // As if SIGTERM had reached rank 1 before the first step: the request is reduced during step 1
  // and seen by every rank before step 2.
  if (rank == 1) request_stop_for_test(SIGTERM);
  const TrainSummary s = trainer.train();
  clear_stop_signal();
  CHECK(s.stopped_by_signal);
  CHECK(s.steps == 1);
  if (rank == 0) {
    std::ifstream summary(dir + "/runs/run/summary.json");
    std::stringstream text;
    text << summary.rdbuf();
    CHECK(text.str().find("\"stopped_by_signal\":true") != std::string::npos);
    CHECK(text.str().find("\"steps\":1,") != std::string::npos);
  }
}
