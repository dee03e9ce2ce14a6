// End to end: autoloco-bench --train under mpiexec with 2 dcs of 1 rank on the CPU with a tiny
// model: one JSON object from rank 0 with the world's layout, rounds timed, positive step times
// and rates, and no MFU (there is no GPU peak to divide by); a bad --peak-tflops is refused.
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"

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
