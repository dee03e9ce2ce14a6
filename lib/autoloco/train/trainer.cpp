#include "autoloco/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>

#include "autoloco/comm/intra_dc.hpp"
#include "autoloco/metrics/progress.hpp"
#include "autoloco/model/hf_weights.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/lr_schedule.hpp"
#include "autoloco/optim/muon.hpp"
#include "autoloco/train/device_placement.hpp"
#include "autoloco/train/elastic_settings.hpp"
#include "autoloco/train/full_shard.hpp"
#include "autoloco/train/init_tokenizer.hpp"
#include "autoloco/train/precision.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/fault_injection.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/memory_usage.hpp"
#include "autoloco/util/mpi_threads.hpp"
#include "autoloco/util/signals.hpp"

namespace autoloco {
namespace {

// World rank 0's values to every rank (through host memory: the world communicator is MPI).
void broadcast_values(FlatParams& params, MpiCommunicator& world) {
  torch::NoGradGuard no_grad;
  torch::Tensor host = params.values().to(torch::kCPU, false, /*copy=*/true);
  world.broadcast(host.data_ptr<float>(), static_cast<size_t>(host.numel()), DType::f32, 0);
  params.values().copy_(host);
}

// World rank 0's parameters to every rank, one tensor at a time (no flat copy of the model).
void broadcast_parameters(torch::nn::Module& model, MpiCommunicator& world) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : model.parameters()) {
    torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
    world.broadcast(host.data_ptr<float>(), static_cast<size_t>(host.numel()), DType::f32, 0);
    p.detach().copy_(host);
  }
}

}  // namespace

Trainer::Trainer(const Config& config, MPI_Comm world, TrainerOptions options)
    : config_(config),
      options_(options),
      watchdog_(config.comm.timeout_s, abort_job(world)),
      world_(world),
      topo_(Topology::from_world(world, static_cast<int>(config.topology.ranks_per_dc))),
      device_(pick_device(config.run, host_ranks(world).local_rank)),
      world_comm_(std::make_unique<MpiCommunicator>(world)),
      intra_mpi_(std::make_unique<MpiCommunicator>(world, topo_.dc, topo_.member)),
      inter_mpi_(std::make_unique<MpiCommunicator>(world, topo_.member, topo_.dc)),
      stop_(world) {
  make_device_current(device_);  // before any CUDA work names no device
  set_watch_thread_name("main thread");
  validate_world(config_, topo_.world_size);
  FaultPlan::from_env();  // a malformed plan fails here, before any work
  if (config_.outer.overlap_steps > 0) require_mpi_thread_multiple("outer.overlap_steps");
  set_threads();
  placement_ = gather_placement(topo_, world_, torch::get_num_threads());
  bf16_ = uses_bf16(config_.run, device_);
  configure_matmul_precision(config_.run, device_);
  grad_comm_ =
      make_intra_dc_communicator(intra_mpi_->handle(), device_.is_cuda() ? device_.index() : -1);
  const auto& wan = config_.wan;
  const WanModel model{wan.bandwidth_gbps, wan.latency_ms,     wan.mode == "sleep",
                       topo_.num_dcs,      topo_.ranks_per_dc, wan.mode == "real"};
  if (config_.elastic.enabled()) {
    // This launch is one dc; the others are reached through the stripe (docs/elastic.md).
    elastic_settings_ = elastic_settings(config_);
    const bool speaks = topo_.member == 0;
    elastic_ = std::make_unique<ElasticLink>(elastic_settings_, *intra_mpi_,
                                             [speaks](const std::string& line) {
                                               if (speaks) log::warn("{}", line);
                                             });
    wan_ = std::make_unique<WanLink>(elastic_->stripe(), model);
  } else {
    wan_ = std::make_unique<WanLink>(*inter_mpi_, model);
  }
  reducer_ = std::make_unique<HierarchicalAllreduce>(*intra_mpi_, *wan_);

  // A directory of another model is refused before any work, on every rank.
  if (!config_.model.init_from.empty()) {
    check_hf_config(config_.model, read_hf_config(config_.model.init_from),
                    config_.model.init_from);
  }
  // Open data first: a missing shard should fail before anything is written.
  data_ = std::make_unique<Mixture>(config_.data, config_.model.vocab_size);
  check_init_from_tokenizer(data_->prepared(), config_.model.init_from);
  HierarchicalAllreduce* across = !outer_method() && topo_.num_dcs > 1 ? reducer_.get() : nullptr;
  grad_sync_ =
      std::make_unique<GradientSync>(*grad_comm_, across, wire_codec(config_.outer),
                                     topo_.world_size, static_cast<uint64_t>(config_.run.seed));
  find_resume_candidates(options_.resume);
  baseline_rss_ = resident_bytes();
  build_instances();
  streams_ = InstanceStreams(device_, instances_.size());
  if (outer_method()) {
    const torch::Device state_device =
        outer_state_device(config_.outer.state_device, device_, params().numel());
    OuterSharding sharding;
    sharding.sharded = config_.topology.shard != "none" && topo_.ranks_per_dc > 1;
    sharding.full = config_.topology.shard == "full" && topo_.ranks_per_dc > 1;
    sharding.host = intra_mpi_.get();
    sharding.replica = grad_comm_.get();
    sync_ =
        make_sync_pipeline(config_, params(), *intra_mpi_, *wan_, state_device, wall_, sharding);
    controller_ = make_interval_controller(config_);
    H_ = controller_->first_interval();
    schedule_ = FragmentSchedule(static_cast<int64_t>(sync_->outer().size()));
    periods_.resize(sync_->outer().size());
  }
  initial_batch_ = instances_[0].batch->plan().batch;
  initial_dc_batch_ = initial_batch_ * static_cast<int64_t>(instances_.size());
  dc_batches_.assign(static_cast<size_t>(topo_.num_dcs), initial_dc_batch_);
  initial_tokens_per_step_ = tokens_per_step();
  check_timeout_covers_sync();

  log_start();
  load_tasks();
  const std::optional<Resumed> resumed = resume(options_.resume);
  open_run_directory(resumed);
  keep_task_ids();
  install_stop_signal_handlers();
}

Trainer::~Trainer() {
  // While an error unwinds, the other ranks may never join the agreement in flight: waiting
  // for it would hang the job that is to be ended (main's MPI_Abort).
  if (std::uncaught_exceptions() > 0) {
    stop_.abandon();
  } else {
    stop_.drain();
  }
}

void Trainer::build_instances() {
  const Recompute recompute = parse_recompute(config_.model.recompute);
  const std::vector<StreamSource> sources = stream_sources();
  for (int id = 0; id < static_cast<int>(config_.batch.instances); ++id) {
    ModelInstance inst;
    inst.id = id;
    inst.stream =
        std::make_unique<BatchStream>(sources, config_.model.seq_len, config_.data.batch_size,
                                      static_cast<uint64_t>(config_.run.seed), dc_id(),
                                      instance_stream_member(id, topo_.member, topo_.ranks_per_dc));
    if (id == 0) torch::manual_seed(static_cast<uint64_t>(config_.run.seed));
    inst.model = make_decoder(config_.model);
    inst.batch = make_batch_controller(config_, topo_.ranks_per_dc);
    const bool full_gradient = inst.batch->needs_samples();
    const ShardMode mode = effective_shard_mode(parse_shard_mode(config_.topology.shard),
                                                topo_.ranks_per_dc, full_gradient);
    if (mode == ShardMode::full) {
      build_full_shard(inst, recompute);
    } else {
      inst.model->to(device_);
      inst.params = std::make_unique<FlatParams>(*inst.model, FlatParams::default_decay_rule(),
                                                 keeps_flat_gradient(mode));
      if (id == 0) {
        if (reads_init_from() && topo_.world_rank == 0) init_from_hf(inst.model);
        // Every replica starts from world rank 0's parameters, whatever the ranks' RNGs did.
        broadcast_values(*inst.params, *world_comm_);
      } else {
        torch::NoGradGuard no_grad;
        inst.params->values().copy_(instances_[0].params->values());
      }
      inst.shard = make_inner_shard(mode, *inst.params, *grad_comm_, *grad_sync_, full_gradient);
      if (recompute == Recompute::blocks)
        inst.model->set_runner(make_recompute_runner(device_, bf16_));
    }
    inst.optimizer =
        make_inner_optimizer(config_.inner, inst.shard->view(),
                             muon_matrices(inst.params->slices(), block_parameters(config_.model)));
    if (inst.batch->needs_samples()) {
      inst.samples = std::make_unique<GradientSamples>(
          SampleLayout::for_dc(topo_.ranks_per_dc).per_rank, topo_.member == 0);
    }
    instances_.push_back(std::move(inst));
  }
}

void Trainer::build_full_shard(ModelInstance& inst, Recompute recompute) {
  // Built whole on the host (once, like FSDP without deferred initialisation), so that every
  // shard mode starts from the same values; then only this member's shard moves to the device.
  if (inst.id == 0) {
    if (reads_init_from() && topo_.world_rank == 0) init_from_hf(inst.model);
    broadcast_parameters(*inst.model, *world_comm_);
  }
  const ShardSpan span(parameter_count(*inst.model), topo_.ranks_per_dc, topo_.member);
  inst.params = std::make_unique<FlatParams>(*inst.model, span.begin(), span.count());
  if (inst.id != 0) {
    torch::NoGradGuard no_grad;
    inst.params->values().copy_(instances_[0].params->values());
  }
  inst.params->move_values(device_);
  inst.shard = make_full_shard(*inst.model, *inst.params, *grad_comm_, recompute, bf16_,
                               inst.batch->needs_samples());
}

void Trainer::init_from_hf(Decoder& model) {
  const std::string& dir = config_.model.init_from;
  const NamedTensors weights = import_hf(dir, config_.model);
  load_parameters(*model, weights);
  if (options_.print_progress) {
    log::info("model.init_from {}: {} tensors read by world rank 0 and sent to every rank", dir,
              weights.size());
  }
}

void Trainer::set_threads() {
  int threads = static_cast<int>(config_.run.threads);
  if (threads == 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::max(1, cores / host_ranks(world_).count);
  }
  // MKL runs on the same OpenMP pool (util/blas.hpp).
  torch::set_num_threads(threads);
}

int64_t Trainer::tokens_per_step() const {
  int64_t sequences = 0;
  for (int64_t b : dc_batches_)
    sequences += b * topo_.ranks_per_dc;
  return sequences * config_.model.seq_len;
}

std::vector<int64_t> Trainer::dc_batch_sequences() const {
  std::vector<int64_t> out;
  for (int64_t b : dc_batches_)
    out.push_back(b * topo_.ranks_per_dc);
  return out;
}

double Trainer::lr_scale(const ModelInstance& inst) const {
  if (config_.batch.lr_scaling != "sqrt") return 1.0;
  return std::sqrt(static_cast<double>(inst.batch->plan().batch) /
                   static_cast<double>(initial_batch_));
}

torch::Tensor Trainer::anchor() const {
  return sync_ ? sync_->outer().anchor() : torch::Tensor();
}

const OuterOptimizer& Trainer::outer_optimizer() const {
  return sync_->outer().last_optimizer();
}

StepResult Trainer::train_step() {
  StepResult r;
  // Per instance, on the device and not yet read: loss, gradient norm, then (adaptive batch)
  // the gradient samples' dot products.
  std::vector<torch::Tensor> unread;
  for (size_t i = 0; i < instances_.size(); ++i) {
    ModelInstance& inst = instances_[i];
    unread.push_back(streams_.run(i, [&] {
      const InstanceStep one = instance_step(inst);
      if (i == 0) r.lr = one.lr;
      std::vector<torch::Tensor> parts = {one.loss.reshape({1}),
                                          one.grad_norm.to(torch::kDouble).reshape({1})};
      if (one.sample_products.defined()) parts.push_back(one.sample_products);
      return torch::cat(parts);
    }));
  }
  // One read for the whole step: each read stalls a GPU's queue until the step's work is done,
  // NCCL's gradient all-reduce among it.
  const torch::Tensor read = [&] {
    const Watch watch(device_.is_cuda() ? "the step's device work (with the intra-dc NCCL "
                                          "all-reduce)"
                                        : "the step's read of its losses");
    return torch::cat(unread).to(torch::kCPU);
  }();
  const double* values = read.data_ptr<double>();
  std::vector<const double*> per_instance;
  for (size_t i = 0, offset = 0; i < instances_.size(); offset += unread[i].numel(), ++i) {
    per_instance.push_back(values + offset);
    ModelInstance& inst = instances_[i];
    if (inst.samples) inst.samples->add_step(values + offset + 2, inst.round_noise);
  }
  if (instances_.size() == 1) {
    r.loss = per_instance[0][0];
    r.grad_norm = per_instance[0][1];
  } else {
    // The rank's loss and gradient norm: its instances' means, weighted by their batches.
    double weight = 0.0, loss = 0.0, norm = 0.0;
    for (size_t i = 0; i < instances_.size(); ++i) {
      const auto b = static_cast<double>(instances_[i].batch->plan().batch);
      weight += b;
      loss += b * per_instance[i][0];
      norm += b * per_instance[i][1];
    }
    r.loss = loss / weight;
    r.grad_norm = norm / weight;
  }
  ++step_;
  tokens_ += tokens_per_step();
  if (!outer_method()) {
    if (topo_.num_dcs > 1) ++rounds_;  // ddp synchronizes the dcs at every step
    return r;
  }
  for (SyncPeriod& period : periods_) {
    ++period.steps;
    period.loss_sum += r.loss;
    period.lr_sum += r.lr;
    period.sequences += dc_batches_[static_cast<size_t>(topo_.dc)];
  }
  // An overlapped sync's outer step lands tau steps after it started; then this step may end
  // the next period.
  if (auto landed = sync_->poll(params(), step_)) on_round(*landed, r);
  for (const int64_t fragment : schedule_.due(step_, H_, finished()))
    end_round(fragment, r);
  return r;
}

Trainer::InstanceStep Trainer::instance_step(ModelInstance& inst) {
  FlatParams& p = *inst.params;
  InstanceStep out;
  inst.shard->begin_step();
  out.loss = forward_backward_async(inst.model, p, *inst.stream, inst.batch->plan(), device_,
                                    inst.samples.get(), bf16_);
  const bool own_samples = inst.samples && !inst.shard->takes_samples();
  if (own_samples) inst.samples->before_sync(p);
  inst.shard->reduce(step_);
  // Of the dc's mean gradient: before clipping scales it.
  if (inst.samples) {
    out.sample_products = own_samples ? inst.samples->products(p) : inst.shard->sample_products();
  }
  out.grad_norm = inst.shard->clip(config_.inner.grad_clip);
  out.lr = inner_lr(config_.inner, progress_step(), config_.run.steps) * lr_scale(inst);
  inst.optimizer->step(out.lr);
  inst.shard->refresh();
  return out;
}

double Trainer::world_mean(double value) {
  const Watch watch("the all-reduce of the logged loss");
  world_comm_->allreduce_sum(&value, 1);
  return value / topo_.world_size;
}

int64_t Trainer::inter_dc_bytes() const {
  return (sync_ ? landed_dc_bytes_ : wan_->dc_bytes()) * topo_.num_dcs;
}

double Trainer::compute_seconds_at(double wall_s) const {
  const double waited = sync_ ? sync_->clock().wait_s : wan_->wall_seconds();
  return std::max(0.0, wall_s - waited);
}

double Trainer::exposed_link_seconds() const {
  if (sync_) return sync_->clock().exposed_link_s;
  // ddp: every sync blocks.
  return wan_->clock_seconds();
}

double Trainer::sim_seconds() const {
  return compute_seconds() + exposed_link_seconds();
}

TrainSummary Trainer::train() {
  TrainSummary s;
  wall_.reset(resumed_wall_s_);
  since_checkpoint_.reset();
  if (elastic_) elastic_begin();
  Timer interval;
  const auto& run = config_.run;
  while (!finished()) {
    // Every rank learns of a signal or a due checkpoint at the same step, one step after the
    // first rank raised it.
    set_watch_position(outer_method() ? rounds_ + 1 : -1, step_ + 1);
    FaultPlan::from_env().at_step(step_ + 1, topo_.world_rank);
    const unsigned agreed = stop_.poll(checkpoint_flags());
    FaultPlan::from_env().in_step(step_ + 1, topo_.world_rank);
    if (agreed & StopAgreement::kStop) {
      s.stopped_by_signal = true;
      log::info("stop requested (signal): ending cleanly at step {}", step_);
      if (options_.write_run_directory && config_.ckpt.on_signal) save_checkpoint("signal");
      break;
    }
    if ((agreed & StopAgreement::kCheckpoint) && options_.write_run_directory) {
      save_checkpoint("every_minutes");
    }
    const int64_t progress_before = progress_step();
    const StepResult r = train_step();
    loop_.loss_sum += r.loss;
    ++loop_.loss_count;
    const bool last = finished();
    if (step_ % run.log_every == 0 || last) {
      loop_.final_train_loss = world_mean(loop_.loss_sum / static_cast<double>(loop_.loss_count));
      log_step(r, loop_.final_train_loss, interval.seconds());
      interval.reset();
      loop_.loss_sum = 0.0;
      loop_.loss_count = 0;
    }
    // On the progress clock, so that runs with different batches evaluate at equal tokens.
    const bool eval_step =
        run.eval_every > 0 && progress_step() / run.eval_every != progress_before / run.eval_every;
    loop_.eval_due = loop_.eval_due || eval_step || last;
    // The outer methods evaluate the anchor: at the first round end at or after the eval step.
    if (loop_.eval_due && (!outer_method() || r.round)) {
      loop_.final_eval_loss = evaluate();
      log_eval(loop_.final_eval_loss);
      loop_.eval_due = false;
    }
    const int64_t every = config_.ckpt.every_steps;
    if (options_.write_run_directory && every > 0 && step_ % every == 0 && !last) {
      save_checkpoint("every_steps");
    }
  }
  stop_.drain();
  // A run stopped mid-flight (without a checkpoint) still completes its messages on every rank.
  if (sync_) sync_->settle();
  // A dc stopped by a signal has not finished the run: a restart of it may go on with the others.
  if (elastic_ && !s.stopped_by_signal) elastic_->finish(rounds_);
  if (options_.write_run_directory && !s.stopped_by_signal && config_.ckpt.at_end &&
      last_checkpoint_step_ != step_) {
    save_checkpoint("end");
  }
  s.final_train_loss = loop_.final_train_loss;
  s.final_eval_loss = loop_.final_eval_loss;
  s.final_eval_bpb = eval_bpb(loop_.final_eval_loss);
  s.steps = step_;
  s.tokens = tokens_;
  s.final_batch = last_round_batches_.empty() ? dc_batch_sequences() : last_round_batches_;
  s.rounds = rounds_;
  s.inter_dc_bytes = inter_dc_bytes();
  s.sent_bytes = wan_->sent_bytes();
  // ddp sends one message of equal size per step.
  s.peak_sync_bytes =
      sync_ ? peak_sync_dc_bytes_ * topo_.num_dcs : (rounds_ > 0 ? s.inter_dc_bytes / rounds_ : 0);
  s.wall_s = wall_.seconds();
  s.model_link_s = wan_->link_seconds();
  s.link_s = wan_->clock_seconds();
  s.exposed_link_s = exposed_link_seconds();
  s.sync_wait_s = sync_ ? sync_->clock().wait_s : wan_->wall_seconds();
  // One reading of the clock for every figure, so that they add up.
  const double compute_s = compute_seconds_at(s.wall_s);
  s.sim_time_s = compute_s + s.exposed_link_s;
  s.compute_utilisation = s.sim_time_s > 0 ? compute_s / s.sim_time_s : 1.0;
  s.compute_utilisation_wall = s.wall_s > 0 ? std::min(1.0, compute_s / s.wall_s) : 1.0;
  s.h_per_round = h_per_round_;
  measure_memory(s);
  write_summary(s);
  return s;
}

}  // namespace autoloco
