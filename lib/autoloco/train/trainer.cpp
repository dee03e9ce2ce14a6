#include "autoloco/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "autoloco/metrics/progress.hpp"
#include "autoloco/optim/lr_schedule.hpp"
#include "autoloco/util/blas_threads.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/signals.hpp"

namespace autoloco {
namespace {

// Gradients cross the intra-dc link in buckets of this many floats (16 MiB), so one huge model
// never needs one huge MPI message and the buckets can later overlap the backward pass.
constexpr int64_t kBucketNumel = int64_t{1} << 22;

torch::Device pick_device(const RunConfig& run, int local_rank) {
  if (run.device == "cpu") return torch::kCPU;
  if (!torch::cuda::is_available()) {
    throw ConfigError(
        "config key run.device: cuda was asked for but LibTorch sees no CUDA device (is this a "
        "CUDA build of LibTorch, and is a GPU visible?); use run.device=cpu");
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

}  // namespace

Trainer::Trainer(const Config& config, MPI_Comm world, TrainerOptions options)
    : config_(config),
      options_(options),
      world_(world),
      topo_(Topology::from_world(world, static_cast<int>(config.topology.ranks_per_dc))),
      world_comm_(std::make_unique<MpiCommunicator>(world)),
      intra_dc_(std::make_unique<MpiCommunicator>(world, topo_.dc, topo_.member)),
      stop_(world),
      model_(nullptr),
      device_(pick_device(config.run, host_ranks(world).local_rank)) {
  validate_world(config_, topo_.world_size);
  if (device_.is_cuda() && topo_.ranks_per_dc > 1) {
    // The intra-dc gradient all-reduce is MPI on host memory until the NCCL path is wired in.
    throw ConfigError(
        "config key run.device: cuda with topology.ranks_per_dc > 1 is not supported by this "
        "build yet (the gradient all-reduce would hand device memory to MPI); use one rank per "
        "dc on a GPU, or run.device=cpu");
  }
  set_threads();

  // Open data first: a missing shard should fail before anything is written.
  train_data_ =
      std::make_unique<TokenDataset>(config_.data.train, config_.model.vocab_size, "data.train");
  val_data_ =
      std::make_unique<TokenDataset>(config_.data.val, config_.model.vocab_size, "data.val");
  std::vector<size_t> subset;
  if (config_.data.partition == "by_shard") {
    subset = shards_for_dc(train_data_->num_shards(), topo_.dc, topo_.num_dcs);
  }
  stream_ = std::make_unique<BatchStream>(
      *train_data_, config_.model.seq_len, config_.data.batch_size,
      static_cast<uint64_t>(config_.run.seed), topo_.dc, topo_.member, subset);

  torch::manual_seed(static_cast<uint64_t>(config_.run.seed));
  model_ = GPT(config_.model);
  model_->to(device_);
  params_ = std::make_unique<FlatParams>(*model_);
  // Every replica starts from world rank 0's parameters, whatever the ranks' RNGs did.
  world_comm_->broadcast(params_->values().data_ptr<float>(), static_cast<size_t>(params_->numel()),
                         DType::f32, 0);
  const auto& in = config_.inner;
  optimizer_ = std::make_unique<FlatAdamW>(
      *params_, AdamWOptions{in.betas[0], in.betas[1], in.eps, in.weight_decay});

  if (options_.write_run_directory && topo_.world_rank == 0) {
    run_dir_.emplace(RunDirectory::create(config_.run.out_dir, config_.run.name));
    run_dir_->write_config(to_yaml(config_));
  }
  install_stop_signal_handlers();
  log_start();
}

Trainer::~Trainer() {
  stop_.drain();
}

void Trainer::set_threads() {
  int threads = static_cast<int>(config_.run.threads);
  if (threads == 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::max(1, cores / host_ranks(world_).count);
  }
  torch::set_num_threads(threads);
  set_blas_threads(threads);
}

int64_t Trainer::tokens_per_step() const {
  return config_.data.batch_size * config_.data.grad_accum * config_.model.seq_len *
         topo_.world_size;
}

void Trainer::log_start() const {
  if (!options_.print_progress) return;
  const auto& m = config_.model;
  log::info("autoloco {} | LibTorch {} | {} ranks = {} dc x {} members | device {} | {} threads",
            AUTOLOCO_VERSION, TORCH_VERSION, topo_.world_size, topo_.num_dcs, topo_.ranks_per_dc,
            device_.str(), torch::get_num_threads());
  log::info("{}", describe_layout(topo_, world_));
  log::info(
      "model: {} layers, {} heads, d_model {}, seq_len {}, vocab {} | {} params | {} "
      "FLOPs/token",
      m.n_layer, m.n_head, m.d_model, m.seq_len, m.vocab_size,
      format_si(static_cast<double>(parameter_count(model_))), format_si(flops_per_token(m)));
  log::info("data: {} train tokens in {} shards, {} val tokens | {} tokens/step",
            format_si(static_cast<double>(train_data_->num_tokens())), train_data_->num_shards(),
            format_si(static_cast<double>(val_data_->num_tokens())), tokens_per_step());
  if (run_dir_) log::info("run directory: {}", run_dir_->path());
}

void Trainer::allreduce_gradients() {
  if (intra_dc_->size() == 1) return;
  torch::Tensor& grads = params_->grads();
  float* data = grads.data_ptr<float>();
  const int64_t n = grads.numel();
  for (int64_t begin = 0; begin < n; begin += kBucketNumel) {
    const int64_t count = std::min(kBucketNumel, n - begin);
    intra_dc_->allreduce_sum(data + begin, static_cast<size_t>(count));
  }
  grads.mul_(1.0 / intra_dc_->size());
}

StepResult Trainer::train_step() {
  StepResult r;
  params_->zero_grad();
  const int64_t accum = config_.data.grad_accum;
  for (int64_t micro = 0; micro < accum; ++micro) {
    Batch batch = stream_->next();
    const torch::Tensor logits = model_->forward(batch.inputs.to(device_));
    const torch::Tensor loss = lm_loss(logits, batch.targets.to(device_));
    (loss / static_cast<double>(accum)).backward();
    r.loss += loss.item<double>() / static_cast<double>(accum);
  }
  allreduce_gradients();
  r.grad_norm = clip_grad_norm(*params_, config_.inner.grad_clip);
  r.lr = inner_lr(config_.inner, step_, config_.run.steps);
  optimizer_->step(r.lr);
  ++step_;
  return r;
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  double sums[2] = {0.0, 0.0};  // loss sum, batches
  for (int64_t i = topo_.world_rank; i < config_.run.eval_batches; i += topo_.world_size) {
    Batch batch = eval_batch(*val_data_, i, config_.data.batch_size, config_.model.seq_len);
    const torch::Tensor logits = model_->forward(batch.inputs.to(device_));
    sums[0] += lm_loss(logits, batch.targets.to(device_)).item<double>();
    sums[1] += 1.0;
  }
  model_->train();
  world_comm_->allreduce_sum(sums, 2);
  return sums[0] / sums[1];
}

double Trainer::world_mean(double value) {
  world_comm_->allreduce_sum(&value, 1);
  return value / topo_.world_size;
}

void Trainer::log_step(const StepResult& r, double interval_loss, double interval_s) {
  const double tokens_per_s =
      static_cast<double>(tokens_per_step() * config_.run.log_every) / std::max(interval_s, 1e-9);
  if (options_.print_progress) {
    log::info("{}", format_progress({step_, config_.run.steps, interval_loss, r.lr, tokens_per_s,
                                     wall_.seconds()}));
  }
  if (!run_dir_) return;
  run_dir_->append_metrics(JsonObject()
                               .add("step", step_)
                               .add("loss", interval_loss)
                               .add("lr", r.lr)
                               .add("grad_norm", r.grad_norm)
                               .add("tokens", step_ * tokens_per_step())
                               .add("tokens_per_s", tokens_per_s)
                               .add("elapsed_s", wall_.seconds()));
}

void Trainer::log_eval(double eval_loss) {
  if (options_.print_progress) {
    log::info("eval at step {}: loss {:.4f} | perplexity {:.3f}", step_, eval_loss,
              std::exp(eval_loss));
  }
  if (!run_dir_) return;
  run_dir_->append_metrics(JsonObject()
                               .add("step", step_)
                               .add("eval_loss", eval_loss)
                               .add("eval_ppl", std::exp(eval_loss))
                               .add("elapsed_s", wall_.seconds()));
}

TrainSummary Trainer::train() {
  TrainSummary s;
  wall_.reset();
  Timer interval;
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  const auto& run = config_.run;
  while (step_ < run.steps) {
    // Every rank learns of a signal at the same step, one step after the first rank saw it.
    if (stop_.poll(stop_signal_received() != 0)) {
      s.stopped_by_signal = true;
      log::info("stop requested (signal): ending cleanly at step {}", step_);
      break;
    }
    const StepResult r = train_step();
    loss_sum += r.loss;
    ++loss_count;
    const bool last = step_ == run.steps;
    if (step_ % run.log_every == 0 || last) {
      s.final_train_loss = world_mean(loss_sum / static_cast<double>(loss_count));
      log_step(r, s.final_train_loss, interval.seconds());
      interval.reset();
      loss_sum = 0.0;
      loss_count = 0;
    }
    if ((run.eval_every > 0 && step_ % run.eval_every == 0) || last) {
      s.final_eval_loss = evaluate();
      log_eval(s.final_eval_loss);
    }
  }
  stop_.drain();
  s.steps = step_;
  s.tokens = step_ * tokens_per_step();
  s.wall_s = wall_.seconds();
  write_summary(s);
  return s;
}

void Trainer::write_summary(const TrainSummary& s) {
  if (options_.print_progress) {
    log::info("done: {} steps, {} tokens, final eval loss {:.4f}, {} wall{}", s.steps,
              format_si(static_cast<double>(s.tokens)), s.final_eval_loss,
              format_duration(s.wall_s), s.stopped_by_signal ? " (stopped by signal)" : "");
  }
  if (!run_dir_) return;
  // Inter-dc figures stay zero until the multi-datacenter engine exists: one dc sends nothing.
  run_dir_->write_summary(JsonObject()
                              .add("steps", s.steps)
                              .add("tokens", s.tokens)
                              .add("rounds", int64_t{0})
                              .add("inter_dc_bytes", int64_t{0})
                              .add("final_train_loss", s.final_train_loss)
                              .add("final_eval_loss", s.final_eval_loss)
                              .add("wall_s", s.wall_s)
                              .add("sim_time_s", s.wall_s)
                              .add("compute_utilisation", 1.0)
                              .add("method", "ddp")
                              .add("controller", "none")
                              .add("h_per_round", std::vector<int64_t>{})
                              .add("stopped_by_signal", s.stopped_by_signal)
                              .add("world_size", int64_t{topo_.world_size})
                              .add("num_dcs", int64_t{topo_.num_dcs})
                              .add("parameters", parameter_count(model_))
                              .add("flops_per_token", flops_per_token(config_.model))
                              .add("tokens_per_s", static_cast<double>(s.tokens) / s.wall_s));
  log::info("results: {}/summary.json, {}/metrics.jsonl", run_dir_->path(), run_dir_->path());
}

}  // namespace autoloco
