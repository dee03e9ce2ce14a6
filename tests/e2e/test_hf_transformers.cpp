// End to end: Hugging Face import and export checked against transformers itself, by
// tests/hf/check_hf.py on nine tiny models (gpt2 tied and untied, llama tied, llama untied with
// grouped-query attention, and the five published configs of tests/hf/fixtures: Llama 3.2,
// Qwen2.5, Qwen3, SmolLM2, Mistral), fp32 logits within 1e-4:
//   import     models made and saved by transformers (whole and sharded) give transformers' logits
//              under `autoloco-ckpt logits`;
//   export     checkpoints of autoloco-train, exported with `autoloco-ckpt export --format hf`
//              (whole and sharded), hold the tensors save_pretrained would write, load with
//              AutoModelForCausalLM.from_pretrained and give our logits;
//   init_from  a run started from a transformers directory holds its weights bitwise, and a run
//              whose model.n_layer differs is refused before any step, naming the key and values.
// They need the Python of scripts/hf-env.sh (scripts/setup.sh installs it for the test presets):
// without it they fail, saying so; they do not skip.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "../support/hf_python.hpp"
#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::contains;
using autoloco::test::hf_python;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::shell_quote;

namespace {

// Runs check_hf.py --part `part` on a tiny byte corpus written here; its output is the test's
// message, and the test fails unless every check of the part passed.
void check_hf(const std::string& part) {
  const autoloco::test::TempDir tmp("e2e-hf-" + part);
  const std::string dir = tmp.str();
  const std::string python =
      hf_python("torch, transformers, safetensors", dir + "/python-check.log");
  const std::string data = autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string log = dir + "/check_hf.log";
  const std::string command = shell_quote(python) + " " + std::string(AUTOLOCO_SOURCE_DIR) +
                              "/tests/hf/check_hf.py --ckpt-exe " + AUTOLOCO_CKPT_EXE +
                              " --train-exe " + AUTOLOCO_TRAIN_EXE + " --mpiexec " +
                              AUTOLOCO_MPIEXEC + " --data " + data + " --work " + dir +
                              "/work --part " + part + " > " + log + " 2>&1";
  const int code = run_command(command);
  const std::string output = read_text(log);
  INFO(command << "\n" << output);
  CHECK(code == 0);
  CHECK(contains(output, "check_hf.py: all checks passed (" + part + "; 9 cases)"));
  // The table is in the CTest log of a passing run too.
  WARN(output);
}

}  // namespace

TEST_CASE("e2e: hf models made by transformers import with transformers' logits", "[e2e][hf]") {
  check_hf("import");
}

TEST_CASE("e2e: hf exports of autoloco checkpoints load in transformers with our logits",
          "[e2e][hf]") {
  check_hf("export");
}

TEST_CASE("e2e: hf model.init_from starts from transformers' weights bitwise, refuses another",
          "[e2e][hf]") {
  check_hf("init_from");
}
