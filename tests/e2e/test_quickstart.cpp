// End to end: text files -> autoloco-prepare -> autoloco-train under mpiexec (the quickstart:
// AutoLoCo across 4 dcs) -> run directory, with the eval loss below 60% of the val split's
// unigram byte entropy.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::json_number;
using autoloco::test::read_text;

namespace {

int run(const std::string& command) {
  INFO(command);
  return std::system(command.c_str());
}

}  // namespace

TEST_CASE(
    "e2e: tiny quickstart across 4 dcs from text to eval loss below 60% of the unigram entropy",
    "[e2e]") {
  const autoloco::test::TempDir tmp("e2e");
  const std::string dir = tmp.str();
  std::filesystem::create_directories(dir + "/text/sub");
  for (int f = 0; f < 6; ++f) {
    std::ofstream(dir + "/text/" + (f % 2 ? "sub/" : "") + "doc" + std::to_string(f) + ".txt")
        << autoloco::test::tiny_text(700, f);
  }
  REQUIRE(run(std::string(AUTOLOCO_PREPARE_EXE) + " --out " + dir + "/data --val-fraction 0.2 " +
              dir + "/text > " + dir + "/prepare.log 2>&1") == 0);
  const double entropy =
      json_number(read_text(dir + "/data/prepare.json"), "val_unigram_entropy_nats");
  CHECK(entropy > 2.0);

  const std::string config = std::string(AUTOLOCO_SOURCE_DIR) + "/configs/quickstart.yaml";
  const std::string train = std::string(AUTOLOCO_MPIEXEC) +
                            " -n 4 --oversubscribe --allow-run-as-root --bind-to none " +
                            AUTOLOCO_TRAIN_EXE + " " + config +
                            " --set model.n_layer=2 --set model.d_model=64 --set model.n_head=2"
                            " --set model.seq_len=64 --set run.steps=120 --set run.eval_every=60"
                            " --set run.log_every=20 --set inner.warmup_steps=10"
                            " --set inner.lr=0.01 --set data.batch_size=8"
                            " --set data.train=" +
                            dir +
                            "/data/train_*.bin"
                            " --set data.val=" +
                            dir +
                            "/data/val_*.bin"
                            " --set run.out_dir=" +
                            dir + "/runs --set run.name=e2e > " + dir + "/train.log 2>&1";
  REQUIRE(run(train) == 0);
  const std::string summary = read_text(dir + "/runs/e2e/summary.json");
  const double eval_loss = json_number(summary, "final_eval_loss");
  INFO("eval loss " << eval_loss << ", unigram entropy " << entropy << "\n" << summary);
  CHECK(json_number(summary, "steps") == 120);
  CHECK(json_number(summary, "num_dcs") == 4);
  CHECK(json_number(summary, "rounds") >= 3);  // rounds of H_0 = 20 at most, fewer if it grew
  CHECK(summary.find("\"controller\":\"autoloco\"") != std::string::npos);
  CHECK(eval_loss <= 0.6 * entropy);
  CHECK(std::filesystem::exists(dir + "/runs/e2e/config.yaml"));
  // Byte tokens: one byte per token, so bits per byte are the loss in bits.
  CHECK(json_number(summary, "final_eval_bpb") == Approx(eval_loss / std::log(2.0)));
  CHECK(summary.find("\"tokenizer\":\"bytes\"") != std::string::npos);
  CHECK(read_text(dir + "/train.log").find(" bpb ") != std::string::npos);

  // The run directory is never overwritten: the same run name again is refused.
  CHECK(run(train) != 0);
  CHECK(read_text(dir + "/runs/e2e/summary.json") == summary);
}

TEST_CASE("e2e: a config error stops every rank before any work and names the key", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-bad");
  const std::string dir = tmp.str();
  const std::string config = std::string(AUTOLOCO_SOURCE_DIR) + "/configs/quickstart.yaml";
  const std::string log = dir + "/train.log";
  const int code =
      run(std::string(AUTOLOCO_MPIEXEC) + " -n 2 --oversubscribe --allow-run-as-root " +
          AUTOLOCO_TRAIN_EXE + " " + config + " --set inner.lrr=0.1 --set run.out_dir=" + dir +
          "/runs > " + log + " 2>&1");
  CHECK(code != 0);
  const std::string text = read_text(log);
  CHECK(text.find("inner.lrr") != std::string::npos);
  CHECK(text.find("did you mean 'inner.lr'") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/runs"));
}

TEST_CASE("e2e: subword tokens from text to bits per byte, and the vocabulary check", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-sp");
  const std::string dir = tmp.str();
  std::filesystem::create_directories(dir + "/text");
  std::ofstream(dir + "/text/novel.txt") << autoloco::test::tiny_text(2000, 3);
  const int prepared = run(std::string(AUTOLOCO_PREPARE_EXE) +
                           " --tokenizer sentencepiece --vocab-size 300 --val-fraction 0.2 --out " +
                           dir + "/data " + dir + "/text > " + dir + "/prepare.log 2>&1");
  const std::string prepare_log = read_text(dir + "/prepare.log");
  if (prepared != 0 && prepare_log.find("no SentencePiece") != std::string::npos) {
    WARN("AUTOLOCO_TEST_SKIPPED: this build has no SentencePiece (libsentencepiece-dev)");
    return;
  }
  INFO(prepare_log);
  REQUIRE(prepared == 0);
  const std::string prepare_json = read_text(dir + "/data/prepare.json");
  const double bytes_per_token = json_number(prepare_json, "val_bytes_per_token");
  CHECK(bytes_per_token > 1.2);  // a vocabulary of 300: few merges
  // One file, cut into documents: val has its share.
  CHECK(json_number(prepare_json, "val_documents") >= 5);

  const std::string train_cmd = std::string(AUTOLOCO_MPIEXEC) +
                                " -n 2 --oversubscribe --allow-run-as-root --bind-to none " +
                                AUTOLOCO_TRAIN_EXE + " " + AUTOLOCO_SOURCE_DIR +
                                "/configs/quickstart-sp.yaml"
                                " --set model.n_layer=1 --set model.d_model=32 --set model.n_head=2"
                                " --set model.seq_len=32 --set run.steps=40 --set run.eval_every=20"
                                " --set run.eval_batches=4 --set inner.warmup_steps=5"
                                " --set data.batch_size=4 --set data.train=" +
                                dir + "/data/train_*.bin --set data.val=" + dir +
                                "/data/val_*.bin --set run.out_dir=" + dir + "/runs";
  // The config's 4096 is not this tokenizer's 300: refused before any work, naming both.
  CHECK(run(train_cmd + " --set run.name=wrong > " + dir + "/wrong.log 2>&1") != 0);
  const std::string wrong = read_text(dir + "/wrong.log");
  CHECK(wrong.find("model.vocab_size is 4096") != std::string::npos);
  CHECK(wrong.find("vocabulary 300") != std::string::npos);
  CHECK(wrong.find("prepare.json") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/runs/wrong"));

  REQUIRE(run(train_cmd + " --set model.vocab_size=300 --set run.name=sp > " + dir +
              "/sp.log 2>&1") == 0);
  const std::string summary = read_text(dir + "/runs/sp/summary.json");
  INFO(summary);
  CHECK(summary.find("\"tokenizer\":\"sentencepiece\"") != std::string::npos);
  const double loss = json_number(summary, "final_eval_loss");
  CHECK(json_number(summary, "final_eval_bpb") == Approx(loss / std::log(2.0) / bytes_per_token));
  CHECK(read_text(dir + "/runs/sp/metrics.jsonl").find("\"eval_bpb\":") != std::string::npos);
}
