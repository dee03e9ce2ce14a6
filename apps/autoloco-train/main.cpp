// autoloco-train: the one training executable, launched by mpirun or srun with a YAML config.
//   autoloco-train CONFIG.yaml [--set section.key=value ...] [--resume auto|PATH]
//                  [--allow-topology-change] [--print-config]
//   autoloco-train CONFIG.yaml --plan --world N [...]   (memory and link plan: plan.hpp)
//   autoloco-train --config-reference     (the Markdown reference of every key: docs/config.md)
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/model/hf_config.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/mpi_threads.hpp"
#include "plan.hpp"

namespace {

constexpr const char* kUsage =
    "usage: autoloco-train CONFIG.yaml [--set section.key=value ...] [--resume auto|PATH]\n"
    "                      [--allow-topology-change] [--print-config]\n"
    "       autoloco-train CONFIG.yaml --plan --world N [--device-memory 141GB]\n"
    "                      [--step-time SECONDS | --mfu 0.4 --device-flops 989e12] [--set ...]\n"
    "       autoloco-train --config-reference\n"
    "Trains a decoder (GPT-2 or Llama) with the given config; every key and its default: "
    "docs/config.md.\n"
    "  --set K=V          override one config key (repeatable), e.g. --set run.steps=200\n"
    "  --resume auto      continue from the newest valid checkpoint of the run directory, or\n"
    "                     start the run when it has none (what a requeued job should pass)\n"
    "  --resume PATH      continue from the checkpoint directory PATH (checkpoints/step_<N>)\n"
    "  --allow-topology-change\n"
    "                     with --resume: go on from a checkpoint of another number of dcs\n"
    "                     (a job that lost nodes); dc d continues old dc d mod the old count\n"
    "  --print-config     print the effective config (after overrides) and exit\n"
    "  --config-reference print the Markdown reference of every config key and exit\n"
    "  --plan             print the bytes per rank by class for topology.shard none, optimizer\n"
    "                     and gradients, one sync's bytes and link seconds on the config's wan\n"
    "                     and the compute utilisation at interval.H, for a job of --world N\n"
    "                     ranks that need not exist (no training; docs/sharding.md)\n"
    "  --world N          with --plan: ranks of the job, a multiple of topology.ranks_per_dc\n"
    "  --device-memory M  with --plan: judge each mode against M bytes per device (units B,\n"
    "                     kB, MB, GB, TB, KiB, MiB, GiB, TiB; e.g. 141GB)\n"
    "  --step-time S      with --plan: compute seconds per inner step; else from FLOPs:\n"
    "  --mfu U --device-flops F   with --plan: a step takes FLOPs per token x tokens per rank\n"
    "                     per step / (U x F) (defaults 0.4 and 989e12, an H100's dense bf16)\n";

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string resume;
  bool allow_topology_change = false;
  bool print_config = false;
  bool config_reference = false;
  bool help = false;
  bool plan = false;
  PlanArgs plan_args;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--set") {
      if (i + 1 >= argc) throw autoloco::ConfigError("--set needs section.key=value");
      a.overrides.emplace_back(argv[++i]);
    } else if (arg.rfind("--set=", 0) == 0) {
      a.overrides.push_back(arg.substr(6));
    } else if (arg == "--resume") {
      if (i + 1 >= argc) throw autoloco::ConfigError("--resume needs auto or a checkpoint path");
      a.resume = argv[++i];
    } else if (arg.rfind("--resume=", 0) == 0) {
      a.resume = arg.substr(9);
    } else if (arg == "--allow-topology-change") {
      a.allow_topology_change = true;
    } else if (arg == "--print-config") {
      a.print_config = true;
    } else if (arg == "--config-reference") {
      a.config_reference = true;
    } else if (arg == "--plan") {
      a.plan = true;
    } else if (is_plan_option(arg)) {
      if (i + 1 >= argc) throw autoloco::ConfigError(arg + " needs a value; see --help");
      a.plan_args.values.emplace_back(arg, argv[++i]);
    } else if (arg == "-h" || arg == "--help") {
      a.help = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw autoloco::ConfigError("unknown option '" + arg + "'; see --help");
    } else if (a.config_path.empty()) {
      a.config_path = arg;
    } else {
      throw autoloco::ConfigError("more than one config file given ('" + a.config_path + "' and '" +
                                  arg + "')");
    }
  }
  if (a.allow_topology_change && a.resume.empty()) {
    throw autoloco::ConfigError("--allow-topology-change applies to a resume: give --resume too");
  }
  if (!a.plan && !a.plan_args.values.empty()) {
    throw autoloco::ConfigError(a.plan_args.values.front().first +
                                " belongs to a plan: give --plan too");
  }
  if (!a.help && !a.config_reference && a.config_path.empty()) {
    throw autoloco::ConfigError("no config file given; see --help");
  }
  return a;
}

// One failing rank must not leave the others waiting in a collective. An error while training
// ends the job with the trainer as it stands: its destructor would wait for other ranks (the
// stop agreement in flight, a sync on the communication thread) that a failing job never
// brings, and would free buffers that posted MPI requests still target.
[[noreturn]] void end_job(const std::exception& e) {
  autoloco::log::error("{}", e.what());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

int run(int argc, char** argv, int rank) {
  const Args args = parse_args(argc, argv);
  if (args.help) {
    if (rank == 0) std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.config_reference) {
    if (rank == 0) std::fputs(autoloco::config_reference_markdown().c_str(), stdout);
    return 0;
  }
  // model.init_from describes the model: the keys the config leaves unset come from there.
  const autoloco::Config config =
      autoloco::load_config(args.config_path, args.overrides, autoloco::read_hf_config);
  if (args.print_config) {
    if (rank == 0) std::fputs(autoloco::to_yaml(config).c_str(), stdout);
    return 0;
  }
  if (args.plan) {
    // Runs on no machine of the plan: one process prints it, whatever launched it.
    const std::string report = plan_text(config, args.config_path, args.plan_args);
    if (rank == 0) std::fputs(report.c_str(), stdout);
    return 0;
  }
  autoloco::TrainerOptions options;
  options.resume = args.resume;
  options.allow_topology_change = args.allow_topology_change;
  auto trainer = std::make_unique<autoloco::Trainer>(config, MPI_COMM_WORLD, options);
  try {
    trainer->train();
  } catch (const std::exception& e) {
    end_job(e);
  }
  trainer.reset();  // a normal end: whatever is in flight completes on every rank
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  autoloco::init_mpi_multithreaded(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  autoloco::log::set_rank(rank);
  int code = 0;
  try {
    code = run(argc, argv, rank);
  } catch (const std::exception& e) {
    end_job(e);
  }
  MPI_Finalize();
  return code;
}
