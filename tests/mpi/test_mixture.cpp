// data.sources in a run (2 dcs): metrics report tokens per source in the weights' shares, eval
// reports each source's val loss and their weighted mean, and a run stopped and resumed ends
// bitwise equal to the one never stopped, its per-source token counts included.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include <mpi.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "../support/resume_check.hpp"
#include "../support/run_files.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/train/trainer.hpp"

using namespace autoloco;
using test::check_same_state;
using test::json_number;
using test::lines_without_clock;
using test::read_lines;
using test::read_text;
using test::run;
using test::run_dir;
using test::SharedCorpus;
using test::world_rank;

namespace {

// Two sources, "web" three times as likely as "code", each a prepared directory.
Config mixture_config(const SharedCorpus& web, const SharedCorpus& code, const std::string& name) {
  Config c = web.config(1);
  c.data.train.clear();
  c.data.val.clear();
  c.data.sources = {DataSource{"web", {web.dir}, {}, 3.0}, DataSource{"code", {code.dir}, {}, 1.0}};
  c.data.batch_size = 8;
  c.run.name = name;
  c.run.steps = 60;
  c.run.eval_every = 30;
  c.run.log_every = 10;
  c.interval.H = 5;
  c.ckpt.every_minutes = 0;
  c.ckpt.keep_last = 10;
  return c;
}

// The number after "name": inside the object that follows `field` on `line`.
double field_in(const std::string& line, const std::string& field, const std::string& name) {
  const size_t at = line.find("\"" + field + "\":{");
  REQUIRE(at != std::string::npos);
  return json_number(line.substr(at + field.size() + 3), name);
}

}  // namespace

TEST_CASE("a mixture run trains each source in its weight's share and evaluates each",
          "[np=2][mixture]") {
  const SharedCorpus web("mixture-web");
  const SharedCorpus code("mixture-code");
  const Config c = mixture_config(web, code, "mixture");
  const TrainSummary s = run(c);
  REQUIRE(s.steps == 60);
  if (world_rank() != 0) return;
  const std::vector<std::string> lines = read_lines(run_dir(c) + "/metrics.jsonl");
  std::string last_step, last_eval;
  for (const std::string& line : lines) {
    if (line.find("\"tokens_by_source\"") != std::string::npos) last_step = line;
    if (line.find("\"eval_by_source\"") != std::string::npos) last_eval = line;
  }
  REQUIRE(!last_step.empty());
  REQUIRE(!last_eval.empty());
  const double tokens = json_number(last_step, "tokens");
  const double web_tokens = field_in(last_step, "tokens_by_source", "web");
  const double code_tokens = field_in(last_step, "tokens_by_source", "code");
  INFO(last_step);
  CHECK(web_tokens + code_tokens == Approx(tokens).margin(1));
  // 2 dcs x 60 steps x 8 sequences = 960 samples.
  CHECK(std::abs(web_tokens / tokens - 0.75) < 0.01);
  CHECK(std::abs(code_tokens / tokens - 0.25) < 0.01);

  // The headline eval loss is the weights' mean of the sources'.
  const std::string web_eval = last_eval.substr(last_eval.find("\"web\":{"));
  const std::string code_eval = last_eval.substr(last_eval.find("\"code\":{"));
  const double web_loss = json_number(web_eval, "loss");
  const double code_loss = json_number(code_eval, "loss");
  INFO(last_eval);
  CHECK(json_number(last_eval, "eval_loss") == Approx(0.75 * web_loss + 0.25 * code_loss));
  CHECK(s.final_eval_loss == Approx(0.75 * web_loss + 0.25 * code_loss));
  const std::string summary = read_text(run_dir(c) + "/summary.json");
  CHECK(summary.find("\"sources\":[{\"name\":\"web\",\"weight\":0.75") != std::string::npos);
}

TEST_CASE("a mixture run stopped and resumed ends bitwise equal to the run never stopped",
          "[np=2][mixture][resume]") {
  const SharedCorpus web("mixture-resume-web");
  const SharedCorpus code("mixture-resume-code");
  const Config ref = mixture_config(web, code, "reference");
  run(ref);
  const Config cut = mixture_config(web, code, "cut");
  const TrainSummary first = run(cut, "", 23);  // mid-round, mid-log-interval
  CHECK(first.stopped_by_signal);
  const TrainSummary rest = run(cut, "auto");
  CHECK(rest.steps == 60);
  MPI_Barrier(MPI_COMM_WORLD);
  check_same_state(run_dir(ref) + "/checkpoints/" + checkpoint_name(60),
                   run_dir(cut) + "/checkpoints/" + checkpoint_name(60));
  if (world_rank() != 0) return;
  // The metrics lines, tokens per source included, are the uninterrupted run's.
  CHECK(lines_without_clock(run_dir(ref) + "/metrics.jsonl") ==
        lines_without_clock(run_dir(cut) + "/metrics.jsonl"));
}
