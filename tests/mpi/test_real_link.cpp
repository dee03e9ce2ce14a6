// wan.mode real on one host (4 ranks = 2 dcs x 2 members): the run's clock takes the measured
// seconds of every sync and keeps the model's beside them, and the training itself is the
// account mode's bit for bit. The same runs across network-lab hosts are in tests/net/.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <string>

#include "../support/shared_corpus.hpp"

using namespace autoloco;
using test::SharedCorpus;

namespace {

struct Ran {
  TrainSummary summary;
  torch::Tensor anchor;
};

Ran train(const SharedCorpus& corpus, const std::string& mode, int64_t tau) {
  Config c = corpus.config(2);
  c.interval.H = 4;
  c.run.steps = 12;
  c.outer.overlap_steps = tau;
  c.wan.mode = mode;
  Trainer trainer(c, MPI_COMM_WORLD, {false, false});
  Ran r{trainer.train(), {}};
  r.anchor = trainer.anchor().clone();
  return r;
}

}  // namespace

TEST_CASE("wan.mode real charges a blocking sync its measured seconds", "[np=4][real]") {
  const SharedCorpus corpus("real-blocking");
  const Ran account = train(corpus, "account", 0);
  const Ran real = train(corpus, "real", 0);
  CHECK(torch::equal(account.anchor, real.anchor));
  const TrainSummary& s = real.summary;
  CHECK(s.rounds == 3);
  // The model's figure is the account mode's; the clock's is what the ranks sat through.
  CHECK(s.model_link_s == account.summary.link_s);
  CHECK(account.summary.model_link_s == account.summary.link_s);
  CHECK(s.link_s > 0.0);
  CHECK(s.link_s != s.model_link_s);
  // The sum of each sync's measurement, and the total.
  CHECK(s.exposed_link_s == Approx(s.link_s).epsilon(1e-9));
  CHECK(s.sync_wait_s == s.link_s);
  // Compute is wall time less the waiting, so the simulated clock is the wall clock.
  CHECK(s.sim_time_s == Approx(s.wall_s).epsilon(1e-9));
}

TEST_CASE("wan.mode real exposes what the main thread waited for an overlapped sync",
          "[np=4][real]") {
  const SharedCorpus corpus("real-overlap");
  const Ran account = train(corpus, "account", 2);
  const Ran real = train(corpus, "real", 2);
  CHECK(torch::equal(account.anchor, real.anchor));
  const TrainSummary& s = real.summary;
  CHECK(s.model_link_s == account.summary.link_s);
  CHECK(s.link_s > 0.0);
  CHECK(s.exposed_link_s == s.sync_wait_s);
  CHECK(s.sim_time_s == Approx(s.wall_s).epsilon(1e-9));
}
