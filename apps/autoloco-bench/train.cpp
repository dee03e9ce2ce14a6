// autoloco-bench --train: the Trainer's real loop (inner steps, and every H steps the outer sync)
// on every rank of MPI_COMM_WORLD, on synthetic tokens, without a run directory. Times each
// train_step on the host after --warmup steps and reports, as one JSON object on world rank 0:
// the inner step time (median over inner steps, slowest rank), the round step time (mean over
// round steps) and from them the cost of an outer sync, tokens/s over the whole timed loop and
// at the inner-step rate, and on GPUs the model FLOPs utilisation (MFU) of both.
#include <mpi.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "autoloco/comm/topology.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return -1.0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2.0;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return -1.0;
  double sum = 0.0;
  for (double v : values)
    sum += v;
  return sum / static_cast<double>(values.size());
}

// A CUDA step returns once its work is queued; wait for it so the host clock measures the work.
void wait_for_device(const torch::Device& device) {
  if (device.is_cuda() && torch::cuda::is_available()) torch::cuda::synchronize(device.index());
}

struct Timings {
  std::vector<double> inner_s;  // per inner step
  std::vector<double> round_s;  // per step that ended a round (inner step + outer sync)
  double wall_s = 0.0;
  int64_t tokens = 0;           // all ranks
  int64_t tokens_per_step = 0;  // all ranks, when timing began (an adaptive batch may grow)
};

Timings time_steps(Trainer& trainer, const torch::Device& device, int64_t warmup, int64_t steps) {
  for (int64_t i = 0; i < warmup; ++i)
    trainer.train_step();
  wait_for_device(device);
  // Start together: otherwise a rank that left warm-up early times its wait at the first round.
  MPI_Barrier(MPI_COMM_WORLD);
  Timings t;
  const int64_t tokens_before = trainer.tokens();
  t.tokens_per_step = trainer.tokens_per_step();
  Timer wall;
  for (int64_t i = 0; i < steps; ++i) {
    Timer step;
    const StepResult r = trainer.train_step();
    wait_for_device(device);
    (r.round ? t.round_s : t.inner_s).push_back(step.seconds());
  }
  t.wall_s = wall.seconds();
  t.tokens = trainer.tokens() - tokens_before;
  return t;
}

}  // namespace

void remove_shared_temp_dir(const std::string& dir, const HostRanks& host) {
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (host.local_rank == 0) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

// Every rank must read the same shard: rank 0's pid names the directory on all of them.
std::string shared_temp_dir(const std::string& tag) {
  long long pid = static_cast<long long>(::getpid());
  MPI_Bcast(&pid, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() /
          ("autoloco-bench-" + tag + "-" + std::to_string(pid)))
      .string();
}

int train(const Args& args) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string dir = shared_temp_dir("train");
  std::vector<std::string> overrides = args.overrides;
  const Config probe = args.config_path.empty() ? parse_config("", overrides)
                                                : load_config(args.config_path, overrides);
  const std::string shard = dir + "/bench_000.bin";
  // One writer per host, so the ranks of another host (with its own /tmp) find the shard too.
  const HostRanks host = host_ranks(MPI_COMM_WORLD);
  if (host.local_rank == 0) write_synthetic_shard(dir, probe.model.vocab_size);
  MPI_Barrier(MPI_COMM_WORLD);
  overrides.push_back("data.train=" + shard);
  overrides.push_back("data.val=" + shard);
  // The lr schedule must not reach its end (a run's last step always ends a round).
  overrides.push_back("run.steps=" +
                      std::to_string(std::max<int64_t>(1000000, 10 * (args.warmup + args.steps))));
  const Config c = args.config_path.empty() ? parse_config("", overrides)
                                            : load_config(args.config_path, overrides);

  JsonObject out;
  {
    Trainer trainer(c, MPI_COMM_WORLD, {false, false});
    const torch::Device device = trainer.model()->parameters().front().device();
    const Timings t = time_steps(trainer, device, args.warmup, args.steps);
    const int64_t tokens_per_step = t.tokens_per_step;

    // The slowest rank sets the pace of the world: max over ranks (-1: no such step).
    double slowest[3] = {median(t.inner_s), mean(t.round_s), t.wall_s};
    MPI_Allreduce(MPI_IN_PLACE, slowest, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double inner_step_s = slowest[0];
    const double round_step_s = slowest[1];
    const double wall_s = slowest[2];
    // Ranks of a host beyond its device count share a GPU (trainer.cpp: local rank % count).
    int gpus =
        device.is_cuda() && host.local_rank < static_cast<int>(torch::cuda::device_count()) ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    const auto& topo = trainer.topology();
    const double flops = flops_per_token(c.model);
    const double tokens_per_s = static_cast<double>(t.tokens) / wall_s;
    const JsonObject model = model_json(c.model, parameter_count(*trainer.model()));
    out.add("benchmark", "train")
        .add("libtorch", TORCH_VERSION)
        .add("device", device.str())
        .add("world_size", topo.world_size)
        .add("num_dcs", topo.num_dcs)
        .add("ranks_per_dc", topo.ranks_per_dc)
        .add("model", model)
        .add("method", c.outer.method)
        .add("interval_H", c.interval.H)
        .add("precision", c.run.precision)
        .add("tf32", c.run.tf32)
        .add("adamw", c.inner.adamw)
        .add("state_device", c.outer.state_device)
        .add("batch_size", c.data.batch_size)
        .add("grad_accum", c.data.grad_accum)
        .add("threads", int64_t{torch::get_num_threads()})
        .add("tokens_per_step", tokens_per_step)
        .add("warmup", args.warmup)
        .add("steps", args.steps)
        .add("rounds", static_cast<int64_t>(t.round_s.size()))
        .add("wall_s", wall_s)
        .add("tokens_per_s", tokens_per_s)
        .add("flops_per_token", flops)
        .add("gpus", gpus);
    // MFU only where a GPU's peak means something; a CPU's peak is not known here.
    const double peak_flops = static_cast<double>(gpus) * args.peak_tflops * 1e12;
    if (gpus > 0) {
      out.add("peak_tflops", args.peak_tflops).add("mfu", tokens_per_s * flops / peak_flops);
    }
    if (inner_step_s > 0.0) {
      const double inner_tokens_per_s = static_cast<double>(tokens_per_step) / inner_step_s;
      out.add("inner_step_s", inner_step_s).add("inner_tokens_per_s", inner_tokens_per_s);
      if (gpus > 0) out.add("mfu_inner", inner_tokens_per_s * flops / peak_flops);
      // = steps x inner_step_s / wall_s = mfu / mfu_inner: the share of the loop's time that
      // inner steps at their median pace account for; the rest is outer syncs (and stragglers).
      out.add("inner_fraction", tokens_per_s / inner_tokens_per_s);
    }
    if (round_step_s > 0.0) {
      out.add("round_step_s", round_step_s);
      if (inner_step_s > 0.0) out.add("outer_round_s", round_step_s - inner_step_s);
    }
  }
  if (rank == 0) std::printf("%s\n", out.str().c_str());
  remove_shared_temp_dir(dir, host);
  return 0;
}

}  // namespace autoloco::bench
