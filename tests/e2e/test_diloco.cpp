// End to end: configs/diloco.yaml (blocking and overlapped) and configs/adloco.yaml under mpiexec
// with 2 dcs of 1 rank, on a tiny corpus: the run directory holds one syncs.jsonl line per round,
// the inter-dc figures in summary.json and (adloco) each dc's growing batch, and the loss falls
// well below the uniform byte loss (ln 256 = 5.55).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::count_lines;
using autoloco::test::json_number;
using autoloco::test::read_text;

namespace {

// Runs configs/<name>.yaml under mpiexec with 2 ranks on the tiny corpus in `dir`, with the tiny
// model and `extra` overrides; returns mpiexec's status. The run directory is dir/runs/<name>.
int run_tiny(const std::string& dir, const std::string& name, const std::string& extra) {
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string config = std::string(AUTOLOCO_SOURCE_DIR) + "/configs/" + name + ".yaml";
  const std::string command =
      std::string(AUTOLOCO_MPIEXEC) + " -n 2 --oversubscribe --allow-run-as-root --bind-to none " +
      AUTOLOCO_TRAIN_EXE + " " + config +
      " --set model.n_layer=2 --set model.d_model=32 --set model.n_head=2"
      " --set model.seq_len=32 --set run.steps=50 --set run.eval_every=25 --set run.log_every=10"
      " --set inner.warmup_steps=5 --set inner.lr=0.01 --set data.batch_size=4"
      " --set interval.H=10 --set data.train=" +
      dir + "/data/train_*.bin --set data.val=" + dir + "/data/val_*.bin --set run.out_dir=" + dir +
      "/runs --set run.name=" + name + " " + extra + " > " + dir + "/train.log 2>&1";
  INFO(command);
  return std::system(command.c_str());
}

}  // namespace

TEST_CASE("e2e: diloco.yaml across 2 dcs writes rounds and inter-dc bytes", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-diloco");
  const std::string dir = tmp.str();
  REQUIRE(run_tiny(dir, "diloco", "") == 0);
  const std::string run = dir + "/runs/diloco";
  const std::string summary = read_text(run + "/summary.json");
  INFO(summary << "\n" << read_text(dir + "/train.log"));
  CHECK(json_number(summary, "rounds") == 5);
  CHECK(json_number(summary, "num_dcs") == 2);
  CHECK(json_number(summary, "inter_dc_bytes") > 0);
  CHECK(json_number(summary, "link_s") > 0);
  CHECK(json_number(summary, "final_eval_loss") < 4.0);
  CHECK(count_lines(run + "/syncs.jsonl") == 5);
  // The log names the layout and the method.
  const std::string log = read_text(dir + "/train.log");
  CHECK(log.find("2 ranks = 2 dc x 1 members") != std::string::npos);
  CHECK(log.find("method diloco: outer lr 0.7 momentum 0.9") != std::string::npos);
  CHECK(log.find("interval fixed: H 10") != std::string::npos);
}

TEST_CASE("e2e: adloco.yaml grows each dc's batch and ends at the tokens of run.steps", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-adloco");
  const std::string dir = tmp.str();
  // A strict test so that the batch grows within this short run.
  REQUIRE(run_tiny(dir, "adloco", "--set batch.theta=0.2 --set batch.max_micro_batch=4") == 0);
  const std::string run = dir + "/runs/adloco";
  const std::string summary = read_text(run + "/summary.json");
  INFO(summary << "\n" << read_text(dir + "/train.log"));
  CHECK(summary.find("\"batch_controller\":\"adloco\"") != std::string::npos);
  // 50 steps of 2 dcs x 4 sequences x 32 tokens, in fewer and larger steps.
  CHECK(json_number(summary, "tokens") >= 50 * 2 * 4 * 32);
  CHECK(json_number(summary, "steps") < 50);
  CHECK(json_number(summary, "final_eval_loss") < 4.0);
  const std::string syncs = read_text(run + "/syncs.jsonl");
  CHECK(syncs.find("\"batch\":[4,4]") != std::string::npos);
  CHECK(std::regex_search(syncs, std::regex(R"re("batch":\[([5-9]|[1-9][0-9]+),)re")));
  const std::string log = read_text(dir + "/train.log");
  CHECK(log.find("batch adloco: norm test theta 0.2") != std::string::npos);
}

TEST_CASE("e2e: diloco.yaml with the overlapped sync lands each round tau steps late", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-overlap");
  const std::string dir = tmp.str();
  // sleep mode: the communication thread sleeps out each sync (a few ms on this link).
  REQUIRE(run_tiny(dir, "diloco",
                   "--set outer.overlap_steps=2 --set outer.overlap_alpha=0.5 --set wan.mode=sleep"
                   " --set wan.latency_ms=1") == 0);
  const std::string run = dir + "/runs/diloco";
  const std::string summary = read_text(run + "/summary.json");
  const std::string log = read_text(dir + "/train.log");
  INFO(summary << "\n" << log);
  CHECK(json_number(summary, "rounds") == 5);
  CHECK(json_number(summary, "overlap_steps") == 2);
  CHECK(json_number(summary, "exposed_link_s") <= json_number(summary, "link_s"));
  CHECK(json_number(summary, "compute_utilisation_wall") > 0.0);
  CHECK(json_number(summary, "final_eval_loss") < 4.0);
  CHECK(log.find("sync: streaming overlap, tau 2 inner steps, alpha 0.5") != std::string::npos);
  CHECK(log.find("communication thread buffers") != std::string::npos);
  // Rounds end at steps 10, 20, ...; each lands two steps later but the last, which lands at once.
  const std::vector<std::string> lines = autoloco::test::read_lines(run + "/syncs.jsonl");
  REQUIRE(lines.size() == 5);
  CHECK(lines[0].rfind("{\"round\":1,\"step\":10,", 0) == 0);
  CHECK(lines[0].find("\"landed_step\":12,") != std::string::npos);
  CHECK(lines[4].rfind("{\"round\":5,\"step\":50,", 0) == 0);
  CHECK(lines[4].find("\"landed_step\":50,") != std::string::npos);
}
