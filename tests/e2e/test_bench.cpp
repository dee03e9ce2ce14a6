// End to end: autoloco-bench --train under mpiexec with 2 dcs of 1 rank on the CPU with a tiny
// model: one JSON object from rank 0 with the world's layout, rounds timed, positive step times
// and rates, and no MFU (there is no GPU peak to divide by); a bad --peak-tflops is refused.
// autoloco-bench --throughput on a llama model names its architecture; --hf-step times the
// Trainer against transformers' LlamaForCausalLM, or Qwen3ForCausalLM for a Qwen3-shaped model
// (the Python of scripts/hf-env.sh, as the other Hugging Face tests: without it the test fails,
// naming the fix) and reports every repeat, the medians, the ratio and both processes' memory;
// it refuses a gpt2 model, naming the key. No timing is asserted: the numbers need only be
// there and positive.
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/hf_tokenizer.hpp"

using autoloco::test::json_number;
using autoloco::test::read_text;

namespace {

std::string bench_exe() {
  return AUTOLOCO_BENCH_EXE;
}

struct BenchResult {
  int code = -1;
  std::string out;
  std::string err;
};

BenchResult run_bench(const std::string& dir, int ranks, const std::string& args) {
  const std::string command = std::string(AUTOLOCO_MPIEXEC) + " -n " + std::to_string(ranks) +
                              " --oversubscribe --allow-run-as-root --bind-to none " + bench_exe() +
                              " --train " + args + " > " + dir + "/bench.out 2> " + dir +
                              "/bench.err";
  INFO(command);
  BenchResult r;
  r.code = autoloco::test::run_command(command);
  r.out = read_text(dir + "/bench.out");
  r.err = read_text(dir + "/bench.err");
  return r;
}

// One process (mpiexec -n 1) of `mode` (--throughput, --hf-step, ...).
BenchResult run_single(const std::string& dir, const std::string& mode, const std::string& args) {
  const std::string command =
      std::string(AUTOLOCO_MPIEXEC) + " -n 1 --oversubscribe --allow-run-as-root --bind-to none " +
      bench_exe() + " " + mode + " " + args + " > " + dir + "/bench.out 2> " + dir + "/bench.err";
  INFO(command);
  BenchResult r;
  r.code = autoloco::test::run_command(command);
  r.out = read_text(dir + "/bench.out");
  r.err = read_text(dir + "/bench.err");
  return r;
}

// A llama-tiny shrunk to seconds: GQA (4 heads, 2 key/value heads), untied.
constexpr const char* kTinyLlama =
    "--set model.preset=llama-tiny --set model.n_layer=1 --set model.d_model=64"
    " --set model.n_head=4 --set model.n_kv_head=2 --set model.seq_len=32"
    " --set data.batch_size=2 --set run.threads=1 --set run.device=cpu --set run.precision=fp32";

constexpr const char* kTinyCpu =
    "--set run.device=cpu --set model.n_layer=2 --set model.d_model=32 --set model.n_head=2"
    " --set model.seq_len=32 --set data.batch_size=2 --set run.precision=fp32";

}  // namespace

TEST_CASE("e2e: autoloco-bench --train times inner steps and rounds across 2 dcs", "[e2e]") {
  REQUIRE(std::filesystem::exists(bench_exe()));
  const autoloco::test::TempDir tmp("e2e-bench");
  // Warm-up step 1, timed steps 2-7: rounds end at steps 3 and 6.
  const BenchResult r =
      run_bench(tmp.str(), 2, std::string(kTinyCpu) + " --set interval.H=3 --steps 6 --warmup 1");
  INFO(r.out << "\n" << r.err);
  REQUIRE(r.code == 0);
  // Rank 0 alone prints.
  REQUIRE(r.out.find("\"benchmark\":\"train\"") != std::string::npos);
  CHECK(r.out.find("\"benchmark\"") == r.out.rfind("\"benchmark\""));
  CHECK(json_number(r.out, "world_size") == 2);
  CHECK(json_number(r.out, "num_dcs") == 2);
  CHECK(json_number(r.out, "ranks_per_dc") == 1);
  CHECK(json_number(r.out, "steps") == 6);
  CHECK(json_number(r.out, "rounds") == 2);
  CHECK(json_number(r.out, "tokens_per_step") == 2 * 2 * 32);
  CHECK(json_number(r.out, "inner_step_s") > 0);
  CHECK(json_number(r.out, "round_step_s") > 0);
  CHECK(json_number(r.out, "tokens_per_s") > 0);
  CHECK(json_number(r.out, "inner_tokens_per_s") > 0);
  CHECK(json_number(r.out, "flops_per_token") > 0);
  CHECK(json_number(r.out, "gpus") == 0);
  CHECK(r.out.find("\"device\":\"cpu\"") != std::string::npos);
  CHECK(r.out.find("mfu") == std::string::npos);
  CHECK(r.out.find("peak_tflops") == std::string::npos);
}

TEST_CASE("e2e: autoloco-bench --train refuses --peak-tflops 0, naming it", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-bench-peak");
  const BenchResult r = run_bench(tmp.str(), 1, std::string(kTinyCpu) + " --peak-tflops 0");
  INFO(r.out << "\n" << r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("--peak-tflops must be > 0") != std::string::npos);
  CHECK(r.out.find("\"benchmark\"") == std::string::npos);
}

TEST_CASE("e2e: autoloco-bench --throughput on a llama model names its architecture", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-bench-throughput");
  const BenchResult r = run_single(tmp.str(), "--throughput",
                                   std::string(kTinyLlama) + " --steps 2 --warmup 1 --repeats 3");
  INFO(r.out << "\n" << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\"benchmark\":\"throughput\"") != std::string::npos);
  CHECK(r.out.find("\"arch\":\"llama\"") != std::string::npos);
  CHECK(json_number(r.out, "n_kv_head") == 2);
  CHECK(json_number(r.out, "trainer_tokens_per_s") > 0);
  CHECK(json_number(r.out, "plain_tokens_per_s") > 0);
  CHECK(json_number(r.out, "ratio") > 0);
  CHECK(json_number(r.out, "ratio_median") > 0);
  CHECK(r.out.find("\"trainer_tokens_per_s_repeats\":[") != std::string::npos);
}

TEST_CASE("e2e: autoloco-bench --hf-step times the Trainer against transformers' Llama", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-bench-hf-step");
  const std::string python = autoloco::default_hf_python();
  if (autoloco::test::run_command("HF_HUB_OFFLINE=1 '" + python +
                                  "' -c 'import torch, transformers' > /dev/null 2>&1") != 0) {
    FAIL("the Python of the Hugging Face tests, "
         << python
         << ", is missing or cannot import torch and transformers: run scripts/hf-env.sh "
            "(scripts/setup.sh does for the test presets; AUTOLOCO_TORCH_VENV or "
            "AUTOLOCO_HF_PYTHON name another)");
  }
  const BenchResult r = run_single(
      tmp.str(), "--hf-step",
      std::string(kTinyLlama) + " --steps 2 --warmup 1 --repeats 3 --python '" + python + "'");
  INFO(r.out << "\n" << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\"benchmark\":\"hf_step\"") != std::string::npos);
  CHECK(r.out.find("\"arch\":\"llama\"") != std::string::npos);
  CHECK(json_number(r.out, "repeats") == 3);
  CHECK(json_number(r.out, "threads") == 1);
  CHECK(json_number(r.out, "transformers_threads") == 1);
  CHECK(json_number(r.out, "tokens_per_step") == 2 * 32);
  CHECK(r.out.find("\"transformers_attn_implementation\":\"sdpa\"") != std::string::npos);
  CHECK(r.out.find("\"transformers_class\":\"LlamaForCausalLM\"") != std::string::npos);
  CHECK(r.out.find("\"transformers_libtorch\":\"2.") != std::string::npos);
  CHECK(r.out.find("\"libtorch\":\"") != std::string::npos);
  for (const char* key :
       {"autoloco_tokens_per_s", "transformers_tokens_per_s", "ratio", "autoloco_rss_peak_bytes",
        "autoloco_rss_baseline_bytes", "transformers_rss_peak_bytes",
        "transformers_rss_baseline_bytes", "autoloco_last_loss", "transformers_last_loss"}) {
    INFO(key);
    CHECK(json_number(r.out, key) > 0);
  }
  // Every repeat's numbers: three of each.
  for (const char* key : {"autoloco_s", "transformers_s", "ratio_repeats"}) {
    INFO(key);
    const auto at = r.out.find(std::string("\"") + key + "\":[");
    REQUIRE(at != std::string::npos);
    const std::string list = r.out.substr(at, r.out.find(']', at) - at);
    CHECK(std::count(list.begin(), list.end(), ',') == 2);
  }
  // A Qwen3-shaped model is timed against Qwen3ForCausalLM (the parameter counts must agree).
  const BenchResult qwen3 =
      run_single(tmp.str(), "--hf-step",
                 std::string(kTinyLlama) +
                     " --set model.family=qwen3 --set model.qk_norm=true --set model.head_dim=32"
                     " --steps 1 --warmup 0 --repeats 1 --python '" +
                     python + "'");
  INFO(qwen3.out << "\n" << qwen3.err);
  REQUIRE(qwen3.code == 0);
  CHECK(qwen3.out.find("\"transformers_class\":\"Qwen3ForCausalLM\"") != std::string::npos);
}

TEST_CASE("e2e: autoloco-bench --hf-step refuses a gpt2 model and a bad --hf-adamw", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-bench-hf-refuse");
  BenchResult r = run_single(tmp.str(), "--hf-step", std::string(kTinyCpu) + " --steps 1");
  INFO(r.out << "\n" << r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("needs model.arch llama") != std::string::npos);
  CHECK(r.out.find("\"benchmark\"") == std::string::npos);
  r = run_single(tmp.str(), "--hf-step", std::string(kTinyLlama) + " --hf-adamw sgd");
  INFO(r.out << "\n" << r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("--hf-adamw must be fused, foreach or default") != std::string::npos);
}
