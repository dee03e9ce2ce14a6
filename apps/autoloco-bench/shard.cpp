// autoloco-bench --shard: topology.shard (ZeRO stages 1-3 inside a dc) and model.recompute
// under mpirun. For every ranks_per_dc R that divides the world (R = 1, 2, 4 on 4 ranks), every
// mode (none, optimizer, gradients, full; --modes) and recompute setting (--recompute) it builds
// the Trainer on synthetic tokens, runs --warmup steps (the last of which ends a round:
// interval.H = --warmup) then --steps steps, and reports per case:
//  - the planned bytes per rank by class (memory_plan.hpp) and each rank's measured peak
//    resident memory of the steps above what it held before the Trainer (VmHWM, reset by
//    clear_refs once the Trainer is built: building the model holds it whole on the host
//    once, in every mode, which the plan of the steps leaves out), the largest rank's, and their
//    ratio;
//  - the median inner step (slowest rank) and its ratio to none without recompute at the same
//    R, the cases taking turns --repeats times so that drifts of the machine fall on all alike;
//  - the intra-dc bytes per inner step each kind of collective was handed (Communicator::counted)
//  and
//    their bus bytes (nccl-tests' convention: an all-reduce moves 2 (R - 1) / R of its buffer
//    per rank, a reduce-scatter and an all-gather (R - 1) / R each).
#include <malloc.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "autoloco/comm/topology.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/train/memory_plan.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/memory_usage.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

// glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), so a
// case's freed tensors stay in the heap, in the next case's baseline, where that case reuses
// them without its peak showing it: how much depends on the order of frees. A fixed threshold
// keeps every tensor above it mmapped and returned when freed, and malloc_trim returns what
// the heap holds free, so that each case's peak above its baseline is its own live bytes.
void keep_heap_honest() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  malloc_trim(0);
#endif
}

// Resets the kernel's peak resident size (VmHWM) to the current one (Linux >= 4.0).
void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

int64_t peak_since_reset() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return peak_resident_bytes();
}

struct Case {
  int members = 1;
  std::string mode;
  std::string recompute;
  std::vector<double> step_s;  // the slowest rank's, per timed step, over all repeats
  int64_t baseline = 0;        // this rank's resident bytes before the Trainer
  int64_t peak = 0;            // this rank's peak above the baseline (the first repeat)
  CollectiveBytes per_step;    // handed to the intra-dc collectives per inner step
  MemoryClasses planned;
};

double median(std::vector<double> v) {
  if (v.empty()) return -1.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Memory and bytes are taken on the last repeat (`measure`): by then every one-time allocation
// of the process (LibTorch's and MPI's) lies in the baseline.
void run_case(Case& c, const std::vector<std::string>& base, const Args& args, bool measure) {
  std::vector<std::string> overrides = base;
  overrides.push_back("topology.ranks_per_dc=" + std::to_string(c.members));
  overrides.push_back("topology.shard=" + c.mode);
  overrides.push_back("model.recompute=" + c.recompute);
  const Config config = args.config_path.empty() ? parse_config("", overrides)
                                                 : load_config(args.config_path, overrides);
  MPI_Barrier(MPI_COMM_WORLD);
  keep_heap_honest();
  reset_peak();
  const int64_t baseline = resident_bytes();
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  keep_heap_honest();  // what building the model freed leaves the heap
  reset_peak();
  for (int64_t i = 0; i < args.warmup; ++i)
    trainer.train_step();
  MPI_Barrier(MPI_COMM_WORLD);
  CollectiveBytes inner;  // over the inner steps (a round's end all-gathers the replica too)
  int64_t timed = 0;
  for (int64_t i = 0; i < args.steps; ++i) {
    const CollectiveBytes before = trainer.gradient_communicator().counted();
    Timer t;
    const bool round = trainer.train_step().round.has_value();
    double s = t.seconds();
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (round) continue;  // inner steps only (every rank agrees on which steps end a round)
    const CollectiveBytes& after = trainer.gradient_communicator().counted();
    inner.allreduce += after.allreduce - before.allreduce;
    inner.reduce_scatter += after.reduce_scatter - before.reduce_scatter;
    inner.allgather += after.allgather - before.allgather;
    inner.alltoall += after.alltoall - before.alltoall;
    c.step_s.push_back(s);
    ++timed;
  }
  if (!measure) return;
  const int64_t n = std::max<int64_t>(1, timed);
  c.per_step = {inner.allreduce / n, inner.reduce_scatter / n, inner.allgather / n,
                inner.alltoall / n};
  c.baseline = baseline;
  c.peak = peak_since_reset() - baseline;
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  c.planned = plan_memory(config, c.mode, c.members, /*gpu=*/false, world / c.members);
}

JsonObject case_json(const Case& c, const Case& none, MPI_Comm world) {
  int size = 1;
  MPI_Comm_size(world, &size);
  std::vector<int64_t> peaks(static_cast<size_t>(size));
  MPI_Allgather(&c.peak, 1, MPI_INT64_T, peaks.data(), 1, MPI_INT64_T, world);
  const int64_t most = *std::max_element(peaks.begin(), peaks.end());
  const double r = c.members;
  auto bus_of = [&](const CollectiveBytes& b) {
    return 2.0 * (r - 1.0) / r * static_cast<double>(b.allreduce) +
           (r - 1.0) / r * static_cast<double>(b.reduce_scatter + b.allgather + b.alltoall);
  };
  const double bus = bus_of(c.per_step);
  const double none_bus = bus_of(none.per_step);
  const double step = median(c.step_s);
  return JsonObject()
      .add("ranks_per_dc", int64_t{c.members})
      .add("shard", c.mode)
      .add("recompute", c.recompute)
      .add("planned_bytes", memory_classes_json(c.planned))
      .add("measured_peak_bytes", peaks)
      .add("measured_peak_max_bytes", most)
      .add("measured_over_planned",
           static_cast<double>(most) / static_cast<double>(c.planned.total()))
      .add("inner_step_s", step)
      .add("inner_step_ratio_to_none", median(none.step_s) / step)
      .add("intra_dc_bytes_per_step",
           JsonObject()
               .add("allreduce", c.per_step.allreduce)
               .add("reduce_scatter", c.per_step.reduce_scatter)
               .add("allgather", c.per_step.allgather)
               .add("alltoall", c.per_step.alltoall)
               .add("bus_bytes", bus)
               .add("bus_ratio_to_none", none_bus > 0 ? bus / none_bus : -1.0));
}

}  // namespace

int shard(const Args& args) {
  int rank = 0;
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::string dir = shared_temp_dir("shard");
  std::vector<std::string> overrides = args.overrides;
  const Config probe = args.config_path.empty() ? parse_config("", overrides)
                                                : load_config(args.config_path, overrides);
  const HostRanks host = host_ranks(MPI_COMM_WORLD);
  if (host.local_rank == 0) write_synthetic_shard(dir, probe.model.vocab_size);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string tokens = dir + "/bench_000.bin";
  overrides.push_back("data.train=" + tokens);
  overrides.push_back("data.val=" + tokens);
  // The lr schedule does not end within the steps. The first round ends with the last warm-up
  // step, so that the outer momentum exists when memory is measured; rounds after it are left
  // out of the step times.
  const int64_t beyond = std::max<int64_t>(1000000, 10 * (args.warmup + args.steps));
  overrides.push_back("run.steps=" + std::to_string(beyond));
  overrides.push_back("interval.H=" + std::to_string(std::max<int64_t>(1, args.warmup)));

  std::vector<Case> cases;
  const std::vector<std::string> modes =
      args.shard_modes.empty() ? plan_shard_modes() : args.shard_modes;
  const std::vector<std::string> recomputes =
      args.recompute.empty() ? std::vector<std::string>{probe.model.recompute} : args.recompute;
  for (const int members : {1, 2, 4, 8}) {
    if (members > world || world % members != 0) continue;
    for (const std::string& recompute : recomputes) {
      for (const std::string& mode : modes) {
        // A dc of one rank runs every sharded mode as none.
        if (members == 1 && mode != "none") continue;
        Case c;
        c.members = members;
        c.mode = mode;
        c.recompute = recompute;
        cases.push_back(c);
      }
    }
  }
  for (int64_t repeat = 0; repeat < args.repeats; ++repeat) {
    for (Case& c : cases)
      run_case(c, overrides, args, repeat + 1 == args.repeats);
  }
  std::vector<JsonObject> results;
  for (const Case& c : cases) {
    // The baseline: none without recompute at the same R (or the first case of that R).
    auto none = std::find_if(cases.begin(), cases.end(), [&](const Case& o) {
      return o.members == c.members && o.mode == "none" && o.recompute == "none";
    });
    if (none == cases.end()) {
      none = std::find_if(cases.begin(), cases.end(),
                          [&](const Case& o) { return o.members == c.members; });
    }
    results.push_back(case_json(c, *none, MPI_COMM_WORLD));
  }
  if (rank == 0) {
    JsonObject out;
    out.add("benchmark", "shard")
        .add("libtorch", TORCH_VERSION)
        .add("world_size", int64_t{world})
        .add("model", model_json(probe.model, parameter_count(probe.model)))
        .add("batch_size", probe.data.batch_size)
        .add("threads", int64_t{torch::get_num_threads()})
        .add("warmup", args.warmup)
        .add("steps", args.steps)
        .add("repeats", args.repeats)
        .add("cases", results);
    std::printf("%s\n", out.str().c_str());
  }
  remove_shared_temp_dir(dir, host);
  return 0;
}

}  // namespace autoloco::bench
