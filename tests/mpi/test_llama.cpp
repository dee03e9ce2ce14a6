// The llama architecture through the whole distributed path (4 ranks = 2 dcs x 2 members): the
// flat buffer, the intra-dc all-reduce, Streaming DiLoCo fragments over its blocks, the int4 wire
// with error feedback and AutoLoCo's interval all work on it unchanged, it learns, and a run
// stopped mid-round and resumed ends bitwise equal to the one never stopped.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"

using namespace autoloco;
using test::check_same_state;
using test::lines_without_clock;
using test::run;
using test::run_dir;
using test::SharedCorpus;
using test::world_rank;

namespace {

Config llama_config(const SharedCorpus& corpus, const std::string& name) {
  Config c = corpus.config(2);
  c.run.name = name;
  c.run.steps = 30;
  c.run.eval_every = 0;
  c.model.arch = "llama";
  c.model.n_head = 4;
  c.model.n_kv_head = 2;
  c.model.multiple_of = 16;
  c.model.tie_embeddings = false;
  c.outer.fragments = 2;
  c.outer.wire_dtype = "int4";
  c.outer.error_feedback = true;
  c.interval.controller = "autoloco";
  c.interval.H = 6;
  c.interval.H_min = 3;
  c.interval.H_max = 10;
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  validate(c);
  return c;
}

}  // namespace

TEST_CASE("llama trains across dcs with fragments and an int4 wire, and resumes bitwise",
          "[np=4][llama]") {
  const SharedCorpus corpus("llama");
  const Config ref = llama_config(corpus, "reference");
  const TrainSummary s = run(ref);
  CHECK(s.steps == 30);
  CHECK(s.rounds >= 3);
  // Below the uniform byte loss (ln 256 = 5.55) by a clear margin.
  CHECK(s.final_eval_loss < 4.0);

  const Config cut = llama_config(corpus, "cut");
  run(cut, "", 14);
  const TrainSummary rest = run(cut, "auto");
  CHECK(rest.steps == 30);
  MPI_Barrier(MPI_COMM_WORLD);
  check_same_state(run_dir(ref) + "/checkpoints/" + checkpoint_name(30),
                   run_dir(cut) + "/checkpoints/" + checkpoint_name(30));
  if (world_rank() != 0) return;
  for (const char* file : {"/metrics.jsonl", "/syncs.jsonl"}) {
    INFO(file);
    CHECK(lines_without_clock(run_dir(ref) + file) == lines_without_clock(run_dir(cut) + file));
  }
}
