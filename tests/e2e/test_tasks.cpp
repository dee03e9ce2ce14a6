// End to end: a run of 2 dcs scores downstream tasks of every format (cloze items cut from its
// own corpus by scripts/cloze_tasks.py) at each evaluation, and lm-evaluation-harness, run as a
// user would on the run's export (`lm_eval --model hf --model_args pretrained=DIR`, through
// scripts/lm_eval_compare.py), gives the same item counts and correct counts, choice for
// choice, with the byte tokenizer and with a SentencePiece model (subwords: the boundary between
// context and continuation tokenized as the harness does). Needs the Python of scripts/hf-env.sh
// with lm_eval (pinned in scripts/hf-requirements.txt): without it the test fails, saying so.
#include <catch2/catch.hpp>

#include <string>

#include "../support/hf_python.hpp"
#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::contains;
using autoloco::test::hf_python;
using autoloco::test::json_number;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::shell_quote;
using autoloco::test::write_text;

namespace {

// Lines of two of the tiny corpus's sentences (eight words or more, as cloze_tasks.py wants).
void write_corpus(const std::string& dir) {
  for (int f = 0; f < 4; ++f) {
    const std::string text = autoloco::test::tiny_text(240, f + 11);
    std::string joined;
    size_t at = 0;
    for (int i = 0; at < text.size(); ++i) {
      const size_t end = text.find('\n', at);
      joined += text.substr(at, end - at) + (i % 2 == 0 ? " " : "\n");
      at = end + 1;
    }
    write_text(dir + "/text/doc" + std::to_string(f) + ".txt", joined);
  }
}

int run_logged(const std::string& command, const std::string& log, std::string& output) {
  const int code = run_command(command + " > " + shell_quote(log) + " 2>&1");
  output = read_text(log);
  return code;
}

// Prepares dir/text with `prepare_args`, cuts tasks from it, trains 2 dcs with every format
// scored, exports the final anchor and compares with lm_eval; returns the comparison's output.
std::string train_and_compare(const std::string& dir, const std::string& python,
                              const std::string& prepare_args) {
  std::string output;
  REQUIRE(run_logged("cd " + shell_quote(dir) + " && " + AUTOLOCO_PREPARE_EXE + " " + prepare_args +
                         " --val-fraction 0.2 --threads 1 --out data text",
                     dir + "/prepare.log", output) == 0);
  const auto vocab =
      static_cast<int64_t>(json_number(read_text(dir + "/data/prepare.json"), "vocab_size"));
  REQUIRE(run_logged(shell_quote(python) + " " + AUTOLOCO_SOURCE_DIR +
                         "/scripts/cloze_tasks.py --items 24 --out " + shell_quote(dir + "/tasks") +
                         " " + shell_quote(dir) + "/text/*.txt",
                     dir + "/cloze.log", output) == 0);
  std::string tasks;
  for (const char* format : {"mc", "hellaswag", "arc", "piqa", "lambada"}) {
    tasks += std::string(tasks.empty() ? "" : ", ") + "{name: " + format + ", path: " + dir +
             "/tasks/" + format + ".jsonl, format: " + format + "}";
  }
  write_text(dir + "/empty.yaml", "{}\n");
  // seq_len 64: the longer requests lose the start of their context, as in the harness.
  const std::string keys =
      "--set model.preset=llama-tiny --set model.n_layer=1 --set model.seq_len=64 "
      "--set model.vocab_size=" +
      std::to_string(vocab) +
      " --set data.train='data/train_*.bin' --set data.val='data/val_*.bin' "
      "--set data.batch_size=4 --set run.steps=12 --set run.eval_every=6 --set run.eval_batches=2 "
      "--set run.threads=1 --set outer.method=diloco --set interval.H=6 "
      "--set ckpt.at_end=true --set ckpt.every_minutes=0 --set run.out_dir=runs "
      "--set run.name=tasks --set 'eval.tasks=[" +
      tasks + "]'";
  const int trained = run_logged("cd " + shell_quote(dir) + " && " + AUTOLOCO_MPIEXEC +
                                     " -n 2 --oversubscribe --allow-run-as-root --bind-to none " +
                                     AUTOLOCO_TRAIN_EXE + " empty.yaml " + keys,
                                 dir + "/train.log", output);
  INFO(output);
  REQUIRE(trained == 0);
  CHECK(contains(output, "tasks: mc acc_norm"));
  const std::string run = dir + "/runs/tasks";
  const std::string metrics = read_text(run + "/metrics.jsonl");
  CHECK(contains(metrics, "\"tasks\":{\"mc\":{\"acc\":"));
  CHECK(contains(metrics, "\"tasks_s\":"));
  CHECK(contains(metrics, "\"eval_s\":"));
  CHECK(contains(read_text(run + "/summary.json"), "\"lambada\":{\"acc\":"));
  // From the run's directory, where its relative data paths find the tokenizer.
  REQUIRE(run_logged("cd " + shell_quote(dir) + " && " + AUTOLOCO_CKPT_EXE +
                         " export --format hf " + shell_quote(run + "/checkpoints/step_12") + " " +
                         shell_quote(dir + "/hf"),
                     dir + "/export.log", output) == 0);
  const int compared =
      run_logged(shell_quote(python) + " " + AUTOLOCO_SOURCE_DIR + "/scripts/lm_eval_compare.py " +
                     shell_quote(run) + " " + shell_quote(dir + "/hf") + " --json " +
                     shell_quote(dir + "/compare.json"),
                 dir + "/compare.log", output);
  INFO(output);
  CHECK(compared == 0);
  return output;
}

void check_table(const std::string& output) {
  CHECK(contains(output, "\nequal\n"));
  for (const char* task : {"mc", "hellaswag", "arc", "piqa", "lambada"}) {
    INFO(task);
    // Every task's 24 items, none of their decisions different from lm-eval's.
    const size_t row = output.find(std::string("\n") + task + " ");
    REQUIRE(row != std::string::npos);
    const std::string line = output.substr(row + 1, output.find('\n', row + 1) - row - 1);
    CHECK(contains(line, " 24 "));
    CHECK(line.substr(line.size() - 2) == " 0");
  }
}

}  // namespace

TEST_CASE("e2e: tasks scored in the run equal lm-eval's on the export, bytes and subwords",
          "[e2e][hf]") {
  const autoloco::test::TempDir tmp("e2e-tasks");
  const std::string python = hf_python("lm_eval, transformers", tmp.str() + "/python-check.log");
  SECTION("bytes") {
    const std::string dir = tmp.str() + "/bytes";
    write_corpus(dir);
    check_table(train_and_compare(dir, python, ""));
  }
  SECTION("sentencepiece") {
    const std::string dir = tmp.str() + "/sp";
    write_corpus(dir);
    check_table(train_and_compare(dir, python, "--tokenizer sentencepiece --vocab-size 320"));
  }
}
