// autoloco-bench --optimizer: inner.optimizer muon against adamw on the config's model, in one
// process on synthetic tokens. Two measurements, each taking turns R times and keeping the best:
//  - the optimizer step alone on the flat buffers (random gradients), with the seconds Muon
//    spends in Newton-Schulz (synchronised per matrix on a GPU);
//  - the Trainer's whole inner step (forward, backward, clipping, optimizer) under each.
// Reported: seconds of each, muon / adamw ratios, and Newton-Schulz's share of Muon's optimizer
// step and of its inner step.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/model/decoder.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/muon.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// Best seconds per call of `op` over R rounds of `steps` calls.
template <class Op>
double best_per_call(const Args& args, const torch::Device& device, Op op) {
  for (int64_t i = 0; i < args.warmup; ++i)
    op();
  double best = 1e30;
  for (int64_t r = 0; r < args.repeats; ++r) {
    synchronize(device);
    Timer t;
    for (int64_t i = 0; i < args.steps; ++i)
      op();
    synchronize(device);
    best = std::min(best, t.seconds() / static_cast<double>(args.steps));
  }
  return best;
}

Config with_optimizer(Config c, const std::string& optimizer) {
  c.inner.optimizer = optimizer;
  return c;
}

}  // namespace

int optimizer(const Args& args) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("autoloco-bench-" + std::to_string(::getpid())))
          .string();
  const Config c = single_process_config(args, dir);
  Trainer adamw_trainer(with_optimizer(c, "adamw"), MPI_COMM_SELF, {false, false});
  Trainer muon_trainer(with_optimizer(c, "muon"), MPI_COMM_SELF, {false, false});
  const torch::Device device = adamw_trainer.model()->parameters().front().device();

  // The optimizer alone, on a model of its own with fixed random gradients.
  Decoder model = make_decoder(c.model);
  model->to(device);
  FlatParams params(*model);
  {
    torch::NoGradGuard no_grad;
    params.grads().normal_(0.0, 1e-3);
  }
  const AdamWOptions adamw_options{c.inner.betas[0], c.inner.betas[1], c.inner.eps,
                                   c.inner.weight_decay};
  FlatAdamW adamw(params, adamw_options);
  MuonOptions muon_options;
  muon_options.momentum = c.inner.muon_momentum;
  muon_options.nesterov = c.inner.muon_nesterov;
  muon_options.ns_steps = c.inner.muon_ns_steps;
  muon_options.adamw = adamw_options;
  FlatMuon muon(params.view(), muon_matrices(params.slices(), block_parameters(c.model)),
                muon_options);
  const double lr = 1e-4;
  const double adamw_step = best_per_call(args, device, [&] { adamw.step(lr); });
  const double muon_step = best_per_call(args, device, [&] { muon.step(lr); });
  muon.set_timing(true);
  double ns = 1e30;
  for (int64_t r = 0; r < args.repeats * args.steps; ++r) {
    muon.step(lr);
    ns = std::min(ns, muon.last_ns_seconds());
  }
  int64_t muon_elements = 0;
  for (const MuonMatrix& m : muon.matrices())
    muon_elements += m.rows * m.cols;

  // The whole inner step of each, taking turns.
  std::vector<double> adamw_inner, muon_inner;
  for (int64_t r = 0; r < args.repeats; ++r) {
    const int64_t warmup = r == 0 ? args.warmup : 0;
    for (auto [trainer, out] :
         {std::pair{&adamw_trainer, &adamw_inner}, std::pair{&muon_trainer, &muon_inner}}) {
      for (int64_t i = 0; i < warmup; ++i)
        trainer->train_step();
      Timer t;
      for (int64_t i = 0; i < args.steps; ++i)
        trainer->train_step();
      out->push_back(t.seconds() / static_cast<double>(args.steps));
    }
  }
  const double adamw_best = *std::min_element(adamw_inner.begin(), adamw_inner.end());
  const double muon_best = *std::min_element(muon_inner.begin(), muon_inner.end());

  JsonObject out;
  out.add("benchmark", "optimizer")
      .add("libtorch", TORCH_VERSION)
      .add("device", device.str())
      .add("model", model_json(c.model, params.numel()))
      .add("muon_matrices", static_cast<int64_t>(muon.matrices().size()))
      .add("muon_elements", muon_elements)
      .add("ns_steps", c.inner.muon_ns_steps)
      .add("ns_dtype", device.is_cuda() ? "bf16" : "fp32")
      .add("threads", int64_t{torch::get_num_threads()})
      .add("steps", args.steps)
      .add("repeats", args.repeats)
      .add("adamw_optimizer_step_s", adamw_step)
      .add("muon_optimizer_step_s", muon_step)
      .add("optimizer_step_ratio", muon_step / adamw_step)
      .add("newton_schulz_s", ns)
      .add("newton_schulz_share_of_muon_step", ns / muon_step)
      .add("adamw_inner_step_s", adamw_best)
      .add("muon_inner_step_s", muon_best)
      .add("inner_step_ratio", muon_best / adamw_best)
      .add("newton_schulz_share_of_inner_step", ns / muon_best)
      .add("adamw_inner_step_s_repeats", adamw_inner)
      .add("muon_inner_step_s_repeats", muon_inner);
  std::printf("%s\n", out.str().c_str());
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace autoloco::bench
