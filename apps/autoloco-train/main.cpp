// autoloco-train: the one training executable, launched by mpirun or srun with a YAML config.
//   autoloco-train CONFIG.yaml [--set section.key=value ...] [--resume auto|PATH]
//                  [--allow-topology-change] [--print-config]
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
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/mpi_threads.hpp"

namespace {

constexpr const char* kUsage =
    "usage: autoloco-train CONFIG.yaml [--set section.key=value ...] [--resume auto|PATH]\n"
    "                      [--allow-topology-change] [--print-config]\n"
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
    "  --config-reference print the Markdown reference of every config key and exit\n";

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string resume;
  bool allow_topology_change = false;
  bool print_config = false;
  bool config_reference = false;
  bool help = false;
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
  const autoloco::Config config = autoloco::load_config(args.config_path, args.overrides);
  if (args.print_config) {
    if (rank == 0) std::fputs(autoloco::to_yaml(config).c_str(), stdout);
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
