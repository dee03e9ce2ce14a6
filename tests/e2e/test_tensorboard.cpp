// End to end: scripts/tensorboard.py on a run directory made here with known numbers. What it
// writes, read back through TensorBoard's own EventAccumulator (--dump), has the tags, steps and
// values of metrics.jsonl, syncs.jsonl and summary.json, each event's wall_time its sim_time_s; a
// rerun gives the same file; --out DIR puts each run into DIR/<run name>/; a malformed line is
// named by file and line (exit 1) and nothing is written. Without the tensorboard package
// (scripts/setup.sh installs it into .venv-tools/) each test says so and CTest reports it skipped
// (the AUTOLOCO_TEST_SKIPPED marker, tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"

namespace fs = std::filesystem;
using autoloco::test::contains;
using autoloco::test::read_text;
using autoloco::test::run_command;

namespace {

const std::string kEventFile = "events.out.tfevents.0000000000.autoloco";

// Runs scripts/tensorboard.py with `args`, stdout and stderr into `log`; its exit code.
int tensorboard_py(const std::string& args, const std::string& log) {
  return run_command("/usr/bin/python3 " + std::string(AUTOLOCO_SOURCE_DIR) +
                     "/scripts/tensorboard.py " + args + " > " + log + " 2>&1");
}

// Exit 3: the tensorboard package is not installed. Says why the test is skipped.
bool skipped_without_tensorboard(int code, const std::string& log) {
  if (code != 3) return false;
  WARN(
      "AUTOLOCO_TEST_SKIPPED: the tensorboard package is not installed (scripts/setup.sh "
      "installs it into .venv-tools/):\n"
      << read_text(log));
  return true;
}

// One scalar as --dump prints it (its logdir follows).
std::string scalar(const std::string& tag, int step, const std::string& wall_time,
                   const std::string& value) {
  return "{\"tag\": \"" + tag + "\", \"step\": " + std::to_string(step) +
         ", \"wall_time\": " + wall_time + ", \"value\": " + value + ", ";
}

// Writes `lines` to `path`, each with its newline.
void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const std::string& line : lines)
    out << line << "\n";
}

// A run directory in the trainer's format, every number exact in 32 bits: three training lines
// (steps 10, 20, 30, 2 dcs), an evaluation at step 20, two rounds (the second overlapped: it
// ended at step 11 and landed at 13) and a summary.
void write_run(const std::string& run) {
  fs::create_directories(run);
  write_lines(run + "/metrics.jsonl",
              {R"({"step": 10, "loss": 2.5, "lr": 0.125, "grad_norm": 1.5, "tokens": 1280, )"
               R"("batch": [4, 8], "tokens_per_s": 640, "rounds": 2, "inter_dc_bytes": 4000, )"
               R"("sim_time_s": 1.5, "elapsed_s": 2.25})",
               R"({"step": 20, "loss": 2.25, "lr": 0.25, "grad_norm": 1.25, "tokens": 2560, )"
               R"("batch": [4, 8], "tokens_per_s": 640, "rounds": 4, "inter_dc_bytes": 8000, )"
               R"("sim_time_s": 3.5, "elapsed_s": 4.5})",
               R"({"step": 20, "eval_loss": 2.0, "eval_ppl": 7.38905609893065, "eval_bpb": 2.875, )"
               R"("tasks": {"hs": {"acc": 0.25, "acc_norm": 0.5, "n": 8}}, "tasks_s": 1.5, )"
               R"("rounds": 4, "inter_dc_bytes": 8000, "sim_time_s": 3.75, "elapsed_s": 4.75})",
               R"({"step": 30, "loss": 2.0, "lr": 0.0625, "grad_norm": null, "tokens": 3840, )"
               R"("batch": [4, 8], "tokens_per_s": 640, "rounds": 6, "inter_dc_bytes": 12000, )"
               R"("sim_time_s": 5.5, "elapsed_s": 6.75})"});
  write_lines(run + "/syncs.jsonl",
              {R"({"round": 1, "step": 5, "H": 5, "loss": 2.75, "lr_sum": 0.5, "tokens": 640, )"
               R"("batch": [4, 8], "batch_demand": [null, null], "inter_dc_bytes": 2000, )"
               R"("sent_bytes": 1000, "link_s": 0.25, "rho": null, "q": null, "round_s": 0.75, )"
               R"("outer_lr": 0.5, "next_H": 6, "landed_step": 5, "sim_time_s": 1.0, )"
               R"("elapsed_s": 1.25})",
               R"({"round": 2, "step": 11, "H": 6, "loss": 2.5, "lr_sum": 0.75, "tokens": 768, )"
               R"("batch": [4, 8], "batch_demand": [null, null], "inter_dc_bytes": 2000, )"
               R"("sent_bytes": 1000, "link_s": 0.5, "rho": 0.25, "q": 0.0625, "round_s": 0.75, )"
               R"("outer_lr": 0.5, "next_H": 8, "landed_step": 13, "sim_time_s": 2.0, )"
               R"("elapsed_s": 2.5})"});
  write_lines(run + "/summary.json",
              {R"({"steps": 30, "tokens": 3840, "rounds": 2, "inter_dc_bytes": 4000, )"
               R"("final_train_loss": 2.0, "final_eval_loss": 2.0, "sim_time_s": 6.0, )"
               R"("compute_utilisation": 0.75, "method": "diloco", "h_per_round": [5, 6]})"});
}

int count_entries(const std::string& dir) {
  return static_cast<int>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("e2e: tensorboard.py writes the run files as scalars at the simulated time", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-tensorboard");
  const std::string dir = tmp.str();
  const std::string log = dir + "/tb.log";
  const std::string run = dir + "/run_a";
  write_run(run);
  const int code = tensorboard_py(run, log);
  if (skipped_without_tensorboard(code, log)) return;
  INFO(read_text(log));
  REQUIRE(code == 0);
  const std::string events = run + "/tensorboard/" + kEventFile;
  REQUIRE(fs::exists(events));
  CHECK(count_entries(run + "/tensorboard") == 1);

  REQUIRE(tensorboard_py("--dump " + run + "/tensorboard", dir + "/dump.txt") == 0);
  const std::string dump = read_text(dir + "/dump.txt");
  INFO(dump);
  // Training lines: train/<key> at their step, wall_time = sim_time_s; lists per dc; null left out.
  CHECK(contains(dump, scalar("train/loss", 10, "1.5", "2.5")));
  CHECK(contains(dump, scalar("train/loss", 20, "3.5", "2.25")));
  CHECK(contains(dump, scalar("train/loss", 30, "5.5", "2.0")));
  CHECK(contains(dump, scalar("train/lr", 20, "3.5", "0.25")));
  CHECK(contains(dump, scalar("train/inter_dc_bytes", 30, "5.5", "12000.0")));
  CHECK(contains(dump, scalar("train/tokens", 20, "3.5", "2560.0")));
  CHECK(contains(dump, scalar("train/batch/dc1", 10, "1.5", "8.0")));
  CHECK(contains(dump, scalar("train/grad_norm", 20, "3.5", "1.25")));
  CHECK_FALSE(contains(dump, "\"tag\": \"train/grad_norm\", \"step\": 30,"));
  // Evaluation lines: eval/<name> of their eval_<name> numbers only.
  CHECK(contains(dump, scalar("eval/loss", 20, "3.75", "2.0")));
  CHECK(contains(dump, scalar("eval/bpb", 20, "3.75", "2.875")));
  CHECK(contains(dump, scalar("eval/ppl", 20, "3.75", "7.389056")));
  CHECK_FALSE(contains(dump, "\"tag\": \"eval/rounds\""));
  // eval.tasks: tasks/<task>/<figure>, and the time they took.
  CHECK(contains(dump, scalar("tasks/hs/acc_norm", 20, "3.75", "0.5")));
  CHECK(contains(dump, scalar("tasks/hs/n", 20, "3.75", "8.0")));
  CHECK(contains(dump, scalar("eval/tasks_s", 20, "3.75", "1.5")));
  CHECK_FALSE(contains(dump, "\"tag\": \"train/eval_loss\""));
  // Sync lines at their landed_step, and the round's compute utilisation H t / (H t + E):
  // 0.75 / (0.75 + 0.25) blocking; overlapped by 2 steps of t = 0.125 s, E = 0.5 - 0.25.
  CHECK(contains(dump, scalar("sync/H", 5, "1.0", "5.0")));
  CHECK(contains(dump, scalar("sync/H", 13, "2.0", "6.0")));
  CHECK(contains(dump, scalar("sync/rho", 13, "2.0", "0.25")));
  CHECK(contains(dump, scalar("sync/q", 13, "2.0", "0.0625")));
  CHECK_FALSE(contains(dump, "\"tag\": \"sync/rho\", \"step\": 5,"));
  CHECK_FALSE(contains(dump, "\"tag\": \"sync/batch_demand"));
  CHECK(contains(dump, scalar("sync/inter_dc_bytes", 5, "1.0", "2000.0")));
  CHECK(contains(dump, scalar("sync/link_s", 13, "2.0", "0.5")));
  CHECK(contains(dump, scalar("sync/compute_utilisation", 5, "1.0", "0.75")));
  CHECK(contains(dump, scalar("sync/compute_utilisation", 13, "2.0", "0.75")));
  // summary.json at the last step.
  CHECK(contains(dump, scalar("summary/compute_utilisation", 30, "6.0", "0.75")));
  CHECK(contains(dump, scalar("summary/final_eval_loss", 30, "6.0", "2.0")));

  // A rerun replaces the file with the same bytes.
  const std::string first = read_text(events);
  REQUIRE(tensorboard_py(run, log) == 0);
  CHECK(read_text(events) == first);
  CHECK(count_entries(run + "/tensorboard") == 1);

  // --out DIR: DIR/<run name>/, for tensorboard --logdir DIR.
  write_run(dir + "/run_b");
  REQUIRE(tensorboard_py(run + " " + dir + "/run_b/ --out " + dir + "/tb", log) == 0);
  CHECK(read_text(dir + "/tb/run_a/" + kEventFile) == first);
  REQUIRE(fs::exists(dir + "/tb/run_b/" + kEventFile));
  CHECK_FALSE(fs::exists(dir + "/run_b/tensorboard"));
  REQUIRE(tensorboard_py("--dump " + dir + "/tb/run_b", dir + "/dump.txt") == 0);
  CHECK(contains(read_text(dir + "/dump.txt"), scalar("eval/bpb", 20, "3.75", "2.875")));
}

TEST_CASE("e2e: tensorboard.py names a malformed line and writes nothing", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-tensorboard-bad");
  const std::string dir = tmp.str();
  const std::string log = dir + "/tb.log";
  const std::string run = dir + "/run";
  write_run(run);
  // Line 3, the evaluation, cut short, with the lines after it whole.
  write_lines(run + "/metrics.jsonl", {R"({"step": 10, "loss": 2.5, "sim_time_s": 1.5})",
                                       R"({"step": 20, "loss": 2.25, "sim_time_s": 3.5})",
                                       R"({"step": 20, "eval_loss": 2.0,)",
                                       R"({"step": 30, "loss": 2.0, "sim_time_s": 5.5})"});
  const int code = tensorboard_py(run, log);
  if (skipped_without_tensorboard(code, log)) return;
  const std::string text = read_text(log);
  INFO(text);
  CHECK(code == 1);
  CHECK(contains(text, run + "/metrics.jsonl:3: malformed line"));
  CHECK_FALSE(fs::exists(run + "/tensorboard"));

  // A last line without its newline is one the trainer is still writing: left out, said so.
  std::ofstream(run + "/metrics.jsonl") << R"({"step": 10, "loss": 2.5, "sim_time_s": 1.5})"
                                        << "\n"
                                        << R"({"step": 20, "loss": 2.)";
  CHECK(tensorboard_py(run, log) == 0);
  CHECK(contains(read_text(log), run + "/metrics.jsonl:2: left out the last line"));

  // A missing run directory: exit 1, named; no run directory at all: usage, exit 2.
  CHECK(tensorboard_py(dir + "/no-such-run", log) == 1);
  CHECK(contains(read_text(log), dir + "/no-such-run: no such run directory"));
  CHECK(tensorboard_py("", log) == 2);
}
