// End to end: scripts/sweep.py on a tiny corpus: a spec with a DiLoCo grid over H and an
// autoloco group runs every run under mpiexec, writes results.csv, table.md, saving.md and the
// plots, and a second call skips the finished runs.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::count_lines;
using autoloco::test::read_text;

TEST_CASE("e2e: sweep.py runs a grid and skips finished runs and reports", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-sweep");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  std::ofstream(dir + "/spec.yaml") << "base: configs/diloco.yaml\n"
                                       "out: "
                                    << dir
                                    << "/sweep\n"
                                       "ranks: 2\n"
                                       "launcher: mpirun -n 2 --bind-to none\n"
                                       "seeds: [1, 2]\n"
                                       "set:\n"
                                       "  model.n_layer: 1\n"
                                       "  model.d_model: 32\n"
                                       "  model.n_head: 2\n"
                                       "  model.seq_len: 32\n"
                                       "  data.batch_size: 4\n"
                                       "  data.train: "
                                    << dir
                                    << "/data/train_*.bin\n"
                                       "  data.val: "
                                    << dir
                                    << "/data/val_*.bin\n"
                                       "  run.steps: 24\n"
                                       "  run.eval_every: 0\n"
                                       "  inner.warmup_steps: 2\n"
                                       "groups:\n"
                                       "  - name: diloco\n"
                                       "    grid: {interval.H: [2, 4]}\n"
                                       "  - name: autoloco\n"
                                       "    set: {interval.controller: autoloco, interval.H: 3,\n"
                                       "          interval.H_min: 2, interval.H_max: 6}\n"
                                       "curves:\n"
                                       "  diloco: {groups: [diloco]}\n"
                                       "adaptive: [autoloco]\n"
                                       "time_to_target: {reference: diloco, within: 0.5}\n";
  const std::string sweep = "/usr/bin/python3 " + std::string(AUTOLOCO_SOURCE_DIR) +
                            "/scripts/sweep.py --spec " + dir + "/spec.yaml --no-build --bin " +
                            AUTOLOCO_TRAIN_EXE + " --jobs 1";
  const std::string log = dir + "/sweep.log";
  INFO(sweep);
  REQUIRE(std::system((sweep + " > " + log + " 2>&1").c_str()) == 0);
  INFO(read_text(log));
  const std::string out = dir + "/sweep";
  for (const char* run :
       {"diloco_H2_s1", "diloco_H2_s2", "diloco_H4_s1", "diloco_H4_s2", "autoloco_s1"}) {
    CHECK(std::filesystem::exists(out + "/" + run + "/summary.json"));
  }
  CHECK(count_lines(out + "/results.csv") == 1 + 6);  // header + 6 runs
  CHECK(read_text(out + "/table.md").find("| diloco | 2 |") != std::string::npos);
  const std::string saving = read_text(out + "/saving.md");
  CHECK(saving.find("## Curve diloco") != std::string::npos);
  CHECK(saving.find("| autoloco |") != std::string::npos);
  CHECK(std::filesystem::exists(out + "/loss_vs_rounds.png"));
  CHECK(std::filesystem::exists(out + "/h_over_training.png"));
  // Every run reaches a target 50% above DiLoCo's mean final loss at its one evaluation; each
  // row shows its grid values (autoloco has none).
  const std::string timed = read_text(out + "/time_to_target.md");
  CHECK(timed.find("| autoloco |  | 2/2 |") != std::string::npos);
  CHECK(timed.find("| diloco | 2 | 2/2 |") != std::string::npos);
  CHECK(timed.find("| diloco | 4 | 2/2 |") != std::string::npos);
  CHECK(std::filesystem::exists(out + "/time_to_target.png"));

  // A second call finds every run done and runs nothing.
  REQUIRE(std::system((sweep + " > " + log + " 2>&1").c_str()) == 0);
  CHECK(read_text(log).find("6 runs, 6 done, 0 to go") != std::string::npos);

  // Each run starts under the spec's launcher, or the command line's.
  REQUIRE(std::system((sweep + " --dry-run > " + log + " 2>&1").c_str()) == 0);
  CHECK(read_text(log).rfind("mpirun -n 2 --bind-to none " + std::string(AUTOLOCO_TRAIN_EXE), 0) ==
        0);
  REQUIRE(std::system((sweep + " --dry-run --launcher 'scripts/netlab.sh run --dcs 2 " +
                       "--ranks-per-dc 1 --' > " + log + " 2>&1")
                          .c_str()) == 0);
  CHECK(read_text(log).rfind("scripts/netlab.sh run --dcs 2 --ranks-per-dc 1 -- ", 0) == 0);
}

TEST_CASE("e2e: sweep.py --slurm writes one batch script per run that skips itself when done",
          "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-slurm");
  const std::string dir = tmp.str();
  const std::string command = "/usr/bin/python3 " + std::string(AUTOLOCO_SOURCE_DIR) +
                              "/scripts/sweep.py " + AUTOLOCO_SOURCE_DIR +
                              "/configs/diloco.yaml --out " + dir +
                              "/sweep --H 10,20 --seeds 1,2 --slurm --no-submit --no-build"
                              " --sbatch=--partition=cpu > " +
                              dir + "/sweep.log 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  const std::string script = read_text(dir + "/sweep/slurm/run_H20_s2.sbatch");
  INFO(script);
  CHECK(script.find("#SBATCH --ntasks=4") != std::string::npos);
  CHECK(script.find("#SBATCH --partition=cpu") != std::string::npos);
  CHECK(script.find("srun ") != std::string::npos);
  CHECK(script.find("--set interval.H=20 --set run.seed=2") != std::string::npos);
  CHECK(script.find(dir + "/sweep/run_H20_s2/summary.json") != std::string::npos);
  CHECK(std::filesystem::exists(dir + "/sweep/slurm/run_H10_s1.sbatch"));
  CHECK(std::system(("bash -n " + dir + "/sweep/slurm/run_H10_s1.sbatch").c_str()) == 0);
}
