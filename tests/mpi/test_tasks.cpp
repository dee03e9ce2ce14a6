// eval.tasks in a run of 2 dcs of 2 ranks: scoring the tasks leaves the training bit for bit as
// it is without them (the same anchor, the same eval loss), with and without the fully sharded
// path (whose forward is collective: every rank must run as many batches as rank 0), and the
// scores spread over 4 ranks are those of one process scoring every request of the anchor.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "../support/anchor_outcome.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/eval/task_ids.hpp"
#include "autoloco/eval/task_metrics.hpp"
#include "autoloco/eval/task_scorer.hpp"

using namespace autoloco;
using autoloco::test::SharedCorpus;

namespace {

// Items whose right answer continues a line of the val text, the wrong ones other lines' ends;
// some contexts longer than the model's 32 tokens (the harness's left truncation).
void write_task_file(const std::string& path) {
  std::ofstream out(path);
  const std::string text = autoloco::test::tiny_text(40, 7);
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(text.substr(at, end - at));
  for (size_t i = 0; i + 2 < lines.size(); i += 2) {
    const std::string& line = lines[i];
    const size_t cut = line.rfind(' ');
    const std::string context =
        (i % 4 == 0 ? lines[i + 1] + " " : std::string()) + line.substr(0, cut);
    out << "{\"context\": \"" << context << "\", \"choices\": [\"" << line.substr(cut + 1)
        << "\", \"" << lines[i + 2].substr(lines[i + 2].rfind(' ') + 1) << "\", \"waits.\"], "
        << "\"gold\": " << (i / 2) % 3 << "}\n";
  }
}

Config task_config(const SharedCorpus& corpus, const std::string& shard, bool tasks) {
  std::vector<std::string> keys = {"model.n_layer=2",
                                   "model.n_head=2",
                                   "model.d_model=32",
                                   "model.seq_len=32",
                                   "data.batch_size=4",
                                   "data.train=" + corpus.dir + "/train_*.bin",
                                   "data.val=" + corpus.dir + "/val_*.bin",
                                   "run.eval_batches=4",
                                   "inner.warmup_steps=5",
                                   "inner.lr=0.01",
                                   "run.threads=1",
                                   "topology.ranks_per_dc=2",
                                   "topology.shard=" + shard,
                                   "outer.method=diloco",
                                   "interval.H=5",
                                   "run.steps=20",
                                   "run.eval_every=10"};
  if (tasks) {
    keys.push_back("eval.tasks=[{name: mc, path: " + corpus.dir + "/mc.jsonl, format: mc}]");
  }
  return parse_config("", keys);
}

}  // namespace

TEST_CASE(
    "tasks: scoring them leaves the anchor bit for bit, sharded or not, and 4 ranks score as one",
    "[np=4]") {
  SharedCorpus corpus("tasks");
  if (autoloco::test::world_rank() == 0) {
    std::ofstream(corpus.dir + "/prepare.json")
        << "{\"tokenizer\": \"bytes\", \"vocab_size\": 256}\n";
    write_task_file(corpus.dir + "/mc.jsonl");
    REQUIRE(std::system((std::string(AUTOLOCO_PREPARE_EXE) + " --task " + corpus.dir +
                         "/mc.jsonl --task-format mc --tokenizer-from " + corpus.dir + " --out " +
                         corpus.dir + "/mc.ids.jsonl > /dev/null")
                            .c_str()) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ::setenv("AUTOLOCO_PREPARE", AUTOLOCO_PREPARE_EXE, 1);

  for (const std::string shard : {"none", "full"}) {
    INFO("topology.shard " << shard);
    const test::Outcome plain = test::train_outcome(task_config(corpus, shard, false));
    TrainerOptions o(/*write_run_directory=*/false, /*print_progress=*/false);
    Trainer trainer(task_config(corpus, shard, true), MPI_COMM_WORLD, o);
    const TrainSummary s = trainer.train();
    CHECK(torch::equal(trainer.anchor(), plain.anchor));
    CHECK(s.final_eval_loss == plain.eval_loss);
    REQUIRE(trainer.task_results().size() == 1);
    const TaskMetrics& m = trainer.task_results()[0].metrics;
    CHECK(m.n == 19);

    // One process, every request, one batch each: the same outcomes.
    const TaskIds ids = read_task_ids(corpus.dir + "/mc.ids.jsonl");
    REQUIRE(ids.items.size() == 19);
    Decoder model = make_decoder(task_config(corpus, shard, false).model);
    FlatParams params(*model);
    {
      torch::NoGradGuard no_grad;
      params.values().copy_(trainer.anchor());
    }
    model->eval();
    const TaskScorer scorer(ids, 32);
    std::vector<ContinuationScore> scores(scorer.requests());
    torch::NoGradGuard no_grad;
    for (const auto& batch : scorer.batches(0, 1, 1)) {
      scorer.score(
          batch, [&](const torch::Tensor& idx) { return model->forward(idx); }, torch::kCPU,
          scores);
    }
    const TaskMetrics alone = task_metrics(ids, scores);
    CHECK(alone.acc.mean == m.acc.mean);
    CHECK(alone.acc_norm.mean == m.acc_norm.mean);
    CHECK(alone.acc_norm.standard_error == m.acc_norm.standard_error);
  }
}
