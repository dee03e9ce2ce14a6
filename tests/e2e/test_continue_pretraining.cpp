// End to end: configs/continue-pretraining.yaml as docs/models.md's recipe runs it. A Hugging
// Face directory (an autoloco export of a small Qwen3-shaped llama, with its byte-level
// tokenizer) names the model by model.init_from alone; the run trains across 2 dcs, logs the
// keys the directory gave, resumes without reading the weights again (they are gone by then),
// and exports with the model's tokenizer. A corpus of another tokenizer is refused before any
// work, naming both.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

namespace fs = std::filesystem;
using autoloco::test::contains;
using autoloco::test::read_text;
using autoloco::test::run_command;

namespace {

struct Launch {
  int code = -1;
  std::string log;
};

// autoloco-train under mpiexec -n 2 (2 dcs of one rank) with `config` and `sets`.
Launch train(const std::string& dir, const std::string& config, const std::string& name,
             const std::string& sets) {
  const std::string log = dir + "/" + name + ".log";
  const std::string command =
      std::string(AUTOLOCO_MPIEXEC) + " -n 2 --oversubscribe --allow-run-as-root --bind-to none " +
      AUTOLOCO_TRAIN_EXE + " " + AUTOLOCO_SOURCE_DIR + "/configs/" + config +
      " --set data.train=" + dir + "/data/train_*.bin --set data.val=" + dir +
      "/data/val_*.bin --set run.out_dir=" + dir + "/runs --set run.name=" + name +
      " --set run.eval_every=0 --set run.log_every=2 --set run.threads=1 --set data.batch_size=2"
      " --set interval.H=2 --set inner.warmup_steps=1 --set ckpt.every_steps=2"
      " --set ckpt.every_minutes=0 " +
      sets + " > " + log + " 2>&1";
  Launch out;
  out.code = run_command(command);
  out.log = read_text(log);
  return out;
}

int export_hf(const std::string& dir, const std::string& checkpoint, const std::string& out) {
  return run_command(std::string(AUTOLOCO_CKPT_EXE) + " export --format hf " + checkpoint + " " +
                     out + " > " + dir + "/export.log 2>&1");
}

}  // namespace

TEST_CASE("e2e: continued pre-training from a Hugging Face directory, resumed and exported",
          "[e2e][hf]") {
  const autoloco::test::TempDir tmp("e2e-continue");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  autoloco::test::write_text(dir + "/data/prepare.json",
                             R"({"tokenizer": "bytes", "vocab_size": 256})");

  // The "released" model: a Qwen3-shaped llama exported with its tokenizer.
  const Launch base = train(
      dir, "diloco.yaml", "base",
      "--set model.arch=llama --set model.n_layer=2 --set model.d_model=32 --set model.n_head=4"
      " --set model.n_kv_head=2 --set model.head_dim=16 --set model.qk_norm=true"
      " --set model.family=qwen3 --set model.ffn_hidden=48 --set model.seq_len=16"
      " --set run.steps=2");
  INFO(base.log);
  REQUIRE(base.code == 0);
  const std::string hf = dir + "/hf-base";
  REQUIRE(export_hf(dir, dir + "/runs/base/checkpoints/step_2", hf) == 0);
  REQUIRE(fs::exists(hf + "/tokenizer.json"));

  // The recipe: model.init_from and seq_len are the only model keys.
  const std::string from = " --set model.init_from=" + hf + " --set model.seq_len=16";
  const Launch first = train(dir, "continue-pretraining.yaml", "cpt", from + " --set run.steps=4");
  INFO(first.log);
  REQUIRE(first.code == 0);
  CHECK(contains(first.log, "model keys from " + hf + "/config.json"));
  CHECK(contains(first.log, "qk_norm=true"));
  CHECK(contains(first.log, "tensors read by world rank 0"));
  CHECK(contains(read_text(dir + "/runs/cpt/config.yaml"), "arch: \"llama\""));
  CHECK(contains(read_text(dir + "/runs/cpt/config.yaml"), "qk_norm: true"));

  // A resume restores the checkpoint's values: the weights are not read (here they are gone).
  fs::remove(hf + "/model.safetensors");
  const Launch resumed =
      train(dir, "continue-pretraining.yaml", "cpt", from + " --set run.steps=6 --resume auto");
  INFO(resumed.log);
  REQUIRE(resumed.code == 0);
  CHECK(contains(resumed.log, "its weights are not read, the resume restores a checkpoint"));
  CHECK_FALSE(contains(resumed.log, "tensors read by world rank 0"));
  CHECK(contains(resumed.log, "resumed from"));

  // Exported with the model's tokenizer.
  const std::string out = dir + "/hf-continued";
  REQUIRE(export_hf(dir, dir + "/runs/cpt/checkpoints/step_6", out) == 0);
  CHECK(read_text(out + "/tokenizer.json") == read_text(hf + "/tokenizer.json"));
  CHECK(contains(read_text(out + "/config.json"), "Qwen3ForCausalLM"));

  // Data of another tokenizer than the model's: refused before any work, naming both.
  autoloco::test::write_text(hf + "/tokenizer.json", R"({"model": {"type": "WordPiece"}})");
  const Launch other =
      train(dir, "continue-pretraining.yaml", "cpt-other", from + " --set run.steps=2");
  INFO(other.log);
  CHECK(other.code != 0);
  CHECK(contains(other.log, "another tokenizer than model.init_from's"));
  CHECK(contains(other.log, hf + "/tokenizer.json"));
  CHECK_FALSE(fs::exists(dir + "/runs/cpt-other/checkpoints"));
}
