// The Trainer owns the training loop and is the only place that knows the order of events: each
// inner step draws batches from the rank's own stream, runs forward/backward, all-reduces the
// gradients (inside the dc; across the world for ddp), clips and steps the inner optimizer; every
// H steps (outer methods) the round ends with the outer sync; evaluation, metrics and the stop
// protocol sit around that.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoloco/ckpt/manifest.hpp"
#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/elastic_link.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/placement.hpp"
#include "autoloco/comm/stop_agreement.hpp"
#include "autoloco/comm/topology.hpp"
#include "autoloco/comm/wan_link.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/data/mixture.hpp"
#include "autoloco/data/stream.hpp"
#include "autoloco/eval/task_ids.hpp"
#include "autoloco/eval/task_metrics.hpp"
#include "autoloco/eval/task_scorer.hpp"
#include "autoloco/metrics/run_directory.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/inner_optimizer.hpp"
#include "autoloco/optim/round_stats.hpp"
#include "autoloco/sched/batch_controller.hpp"
#include "autoloco/sched/fragment_schedule.hpp"
#include "autoloco/sched/interval_controller.hpp"
#include "autoloco/train/batch_step.hpp"
#include "autoloco/train/gradient_sync.hpp"
#include "autoloco/train/instance_streams.hpp"
#include "autoloco/train/memory_plan.hpp"
#include "autoloco/train/model_instance.hpp"
#include "autoloco/train/outer_sync.hpp"
#include "autoloco/train/recompute.hpp"
#include "autoloco/train/sync_periods.hpp"
#include "autoloco/train/sync_pipeline.hpp"
#include "autoloco/train/topology_change.hpp"
#include "autoloco/util/timer.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {

struct TrainerOptions {
  TrainerOptions(bool write_run_directory_ = true, bool print_progress_ = true)
      : write_run_directory(write_run_directory_), print_progress(print_progress_) {}
  // Tests and benchmarks may run without one; then train() writes no checkpoints either.
  bool write_run_directory = true;
  bool print_progress = true;
  // "" starts a new run; "auto" continues from the newest valid checkpoint of the run directory
  // (or starts a new run when there is none); anything else is a checkpoint directory.
  std::string resume;
  // For tests: behave as if a stop signal had been agreed on when step() reaches this (-1: no).
  int64_t stop_at_step = -1;
  // --allow-topology-change: a checkpoint of another number of dcs may be resumed
  // (topology_change.hpp); without it such a resume is refused.
  bool allow_topology_change = false;
};

struct StepResult {
  double loss = 0.0;  // this rank's mean micro-batch loss of the step
  double lr = 0.0;
  double grad_norm = 0.0;           // dc-wide (ddp: world-wide) gradient norm before clipping
  std::optional<RoundStats> round;  // set when this step ended a round
};

class H5Writer;
class H5Reader;

struct TrainSummary {
  int64_t steps = 0;
  int64_t tokens = 0;           // all ranks
  int64_t rounds = 0;           // inter-dc synchronizations
  int64_t inter_dc_bytes = 0;   // all dcs together: the all-reduced messages' bytes
  int64_t sent_bytes = 0;       // all dcs together: the bytes sent on the link
  int64_t peak_sync_bytes = 0;  // the largest single sync, all dcs together
  double final_train_loss = NAN;
  double final_eval_loss = NAN;
  double final_eval_bpb = NAN;  // bits per byte; NaN without the shards' bytes per token
  double wall_s = 0.0;
  double link_s = 0.0;                    // inter-dc link time (measured in wan.mode real)
  double model_link_s = 0.0;              // the WAN model's link time of the same syncs
  double exposed_link_s = 0.0;            // the part of it that no compute overlapped
  double sync_wait_s = 0.0;               // real seconds the main thread waited on inter-dc syncs
  double sim_time_s = 0.0;                // compute time + exposed link time
  double compute_utilisation = 1.0;       // compute / simulated time
  double compute_utilisation_wall = 1.0;  // compute / wall-clock time
  std::vector<int64_t> h_per_round;
  std::vector<int64_t> final_batch;  // per dc: sequences per inner step of the last round run
  bool stopped_by_signal = false;
  // Per world rank: resident bytes before the model was built, and the peak of the run.
  std::vector<int64_t> baseline_rss_bytes;
  std::vector<int64_t> peak_rss_bytes;
};

class Trainer {
 public:
  Trainer(const Config& config, MPI_Comm world, TrainerOptions options = {});
  ~Trainer();

  // The whole run: steps, rounds, periodic eval, metrics, summary. Stops early (cleanly, on
  // every rank at the same step) when a stop signal arrives.
  TrainSummary train();

  // Writes a checkpoint of the state between two steps (every rank of the world calls it
  // together) into checkpoints/step_<N>, and prunes old ones. Returns its path.
  std::string save_checkpoint(const std::string& reason);
  // <out_dir>/<name>/checkpoints
  std::string checkpoint_dir() const;
  // The checkpoint this run resumed from ("" for a new run).
  const std::string& resumed_from() const { return resumed_from_; }

  // One inner step, and the outer sync when it ends a round (every rank of the world calls it
  // together). The last step of the run always ends a round.
  StepResult train_step();

  // Mean validation loss over run.eval_batches batches, spread over the world's ranks. With an
  // outer method it measures the anchor: call it when a round's outer step has landed (with a
  // blocking sync every replica then equals the anchor; an overlapped one lends the anchor to
  // the model for the evaluation).
  double evaluate();
  // (loss sum, batches) of this rank's share of run.eval_batches batches of one val split.
  std::array<double, 2> eval_split(Decoder& model, const TokenDataset& val);
  // The last evaluation's figures of each of eval.tasks (after evaluate(); empty without tasks).
  struct TaskResult {
    std::string name;
    TaskFormat format = TaskFormat::mc;
    TaskMetrics metrics;
  };
  const std::vector<TaskResult>& task_results() const { return task_results_; }

  const Topology& topology() const { return topo_; }
  // Instance 0's (the only one unless batch.instances > 1).
  FlatParams& params() { return *instances_[0].params; }
  Decoder& model() { return instances_[0].model; }
  size_t instances() const { return instances_.size(); }
  int64_t step() const { return step_; }
  int64_t rounds() const { return rounds_; }
  // The current round's planned length (outer methods).
  int64_t interval() const { return H_; }
  // The anchor (outer methods; undefined for ddp). Under topology.shard each member keeps a
  // shard: then every member of the dc calls it together, and it is gathered.
  torch::Tensor anchor() const;
  // The outer optimizer (outer methods; with fragments, the last one that stepped), e.g. for the
  // momentum and lr its last step used.
  const OuterOptimizer& outer_optimizer() const;
  // An overlapped round's sync has started and its outer step has not landed yet.
  bool sync_in_flight() const { return sync_ && sync_->in_flight(); }
  const WanLink& wan() const { return *wan_; }
  // The dc's communicator of the inner steps (gradients and, sharded, the replica's shards).
  const Communicator& gradient_communicator() const { return *grad_comm_; }
  // Tokens of one inner step of the current round, all ranks (dcs may run different batches).
  int64_t tokens_per_step() const;
  int64_t tokens() const { return tokens_; }  // done so far, all ranks
  // Progress in inner steps at the initial batch: the clock of the lr schedule and of every
  // step-keyed schedule; the run ends when it reaches run.steps. Equals step() for a fixed batch.
  // Since a topology change (which changes the tokens of a step) the clock counts on from where
  // it was.
  int64_t progress_step() const {
    return progress_base_step_ + (tokens_ - progress_base_tokens_) / initial_tokens_per_step_;
  }
  bool finished() const { return progress_step() >= config_.run.steps; }
  // Sequences per rank of each dc's current round (batch.controller, all instances together),
  // and the plan of this rank's instance 0.
  const std::vector<int64_t>& dc_batches() const { return dc_batches_; }
  BatchPlan batch_plan() const { return instances_[0].batch->plan(); }
  bool outer_method() const { return config_.outer.method != "ddp"; }

  // This dc's id: elastic.dc in the elastic mode (where the MPI world is this dc alone), else
  // its place in the world.
  int dc_id() const { return elastic_settings_.dc >= 0 ? elastic_settings_.dc : topo_.dc; }
  // The elastic mode: SHA-256 over the anchor, the outer optimizer's state, the interval
  // controller's state and the round and step counters (what every dc must hold alike after a
  // committed round), as hex. Every member of the dc calls it together.
  std::string state_hash();

 private:
  // Counters of train() that a checkpoint keeps, so a resumed run logs and evaluates exactly as
  // the uninterrupted one.
  struct LoopState {
    double loss_sum = 0.0;  // this rank's losses since the last metrics line
    int64_t loss_count = 0;
    bool eval_due = false;
    double final_train_loss = NAN;
    double final_eval_loss = NAN;
    int64_t tokens_at_log = 0;  // tokens_ at the last metrics line
  };
  // Where a resumed run's files stood when the checkpoint was written.
  struct Resumed {
    std::string path;
    LogSizes logs;
  };

  void set_threads();
  // Each source of the mixture with the shards this dc draws from (data.partition).
  std::vector<StreamSource> stream_sources() const;
  void build_instances();
  // topology.shard full: the instance's parameters, shard and runner (its model built).
  void build_full_shard(ModelInstance& inst, Recompute recompute);
  // One instance's part of an inner step, enqueued; its loss and gradient norm are not read yet.
  struct InstanceStep {
    torch::Tensor loss;             // 0-dim double
    torch::Tensor grad_norm;        // 0-dim float
    torch::Tensor sample_products;  // GradientSamples::products, when the batch adapts
    double lr = 0.0;
  };
  InstanceStep instance_step(ModelInstance& inst);
  // The dc's replica for the round's end and each instance's next batch (into the message).
  BatchDecision decide_batches(const std::vector<NoiseSums>& sums);
  // After this round: the two instances to merge (indices), if a merge is due.
  std::optional<std::pair<size_t, size_t>> due_merge() const;
  void merge_two_instances(size_t into, size_t from);
  // Checkpoints: trainer_checkpoint.cpp (the write), trainer_checkpoint_files.cpp (its files),
  // trainer_load.cpp (the load of one),
  // trainer_resume.cpp (which one, the checks, the fallback, the run directory)
  void open_run_directory(const std::optional<Resumed>& resumed);
  // Lists the checkpoints a resume may restore, newest first, into resume_candidates_: before
  // the model is built, so that a restore skips model.init_from's weights.
  void find_resume_candidates(const std::string& request);
  std::optional<Resumed> resume(const std::string& request);
  std::vector<std::string> resume_candidates(const std::string& request);
  // model.init_from's weights are read unless a checkpoint is to be restored (its values
  // replace them; for a 7B model the read is minutes).
  bool reads_init_from() const {
    return !config_.model.init_from.empty() && resume_candidates_.empty();
  }
  Resumed load_checkpoint(const std::string& path);
  void check_resumable(const std::string& path);
  // The checkpoint's progress_step() (check_resumable has set topology_change_).
  int64_t saved_progress(const H5Reader& g) const;
  // What only this rank's own file holds: data cursors, gradient-noise sums, RNG, the loss
  // accumulated since the last log. A rank new after a topology change starts these afresh.
  void load_rank_own_state(const H5Reader& k, const std::string& file);
  // trainer_checkpoint_files.cpp: each file of a checkpoint.
  ManifestFile write_global_file(const std::string& dir, const std::string& reason);
  ManifestFile write_dc_file(const std::string& dir);
  ManifestFile write_rank_file(const std::string& dir);
  // The rank file's pieces of sharded vectors: the member's moments, its outer shards (dc 0),
  // its residuals.
  void write_rank_shards(H5Writer& w);
  void write_fragment_schedule(H5Writer& w);
  void read_fragment_schedule(const H5Reader& g);
  unsigned checkpoint_flags();
  // Bytes world rank 0 writes for a checkpoint (the global file, its dc's file, its own): the
  // most of any rank, so what sets every checkpoint's pace.
  int64_t checkpoint_bytes_rank0() const;
  // The start log's line on checkpoints: their size, a measured write rate, the expected time
  // against ckpt.timeout_s (world rank 0, with a run directory).
  void log_checkpoint_estimate();
  // Drops the instances that a checkpoint's instances/active no longer lists (merged ones).
  void keep_instances(const std::vector<int64_t>& active, const std::string& file);

  void log_start() const;
  void log_model() const;
  // trainer_memory.cpp: the bytes by class this run's ranks hold, planned and measured.
  MemoryClasses planned_memory() const;
  void log_memory() const;
  std::vector<int64_t> world_values(int64_t value) const;  // every world rank's, in rank order
  void measure_memory(TrainSummary& s) const;              // every rank together
  JsonObject memory_json(const TrainSummary& s) const;
  // model.init_from: the directory's weights into world rank 0's model (hf_weights.hpp).
  void init_from_hf(Decoder& model);
  // One sync of `numel` parameters: the bytes of a dc's message (all its members) and its link
  // seconds; the scalars of an outer round (none for ddp) ride along.
  int64_t sync_message_bytes(int64_t numel) const;
  double sync_seconds(int64_t numel) const;
  size_t sync_scalars() const;
  std::string describe_fragment_syncs() const;  // "" without fragments
  // Fragment p's period (the round, with one fragment) ends with this step: its sync starts
  // (and, blocking, lands).
  void end_round(int64_t fragment, StepResult& r);
  // trainer_elastic.cpp: the elastic mode's start (train, or be healed first), a round's end
  // against the quorum (redone until a quorum commits it; nullopt when this dc was healed
  // instead), and a heal's state out and in.
  void elastic_begin();
  std::optional<RoundStats> elastic_round(const RoundInput& in);
  void elastic_heal(ElasticDecision d);
  // After a committed round's counters: report the state hash, heal the joiners assigned here.
  void elastic_committed();
  std::string heal_state();
  void install_heal(const std::string& bytes);
  // What this dc brings to fragment p's message; at a cycle's end (fragment 0) it also decides
  // the dc's next batches.
  RoundInput round_input(int64_t fragment);
  // A sync's statistics arrived (its outer step has landed): the log, and at a cycle's end the
  // counters and the next H.
  void on_round(const RoundStats& s, StepResult& r);
  // interval.check_consistency: one all-gather; throws CommError naming two ranks that differ.
  void check_round_consistency(const RoundStats& s);
  // interval.check_consistency with fragments: every rank is about to sync the same fragment.
  void check_sync_order(int64_t fragment);
  double world_mean(double value);
  double lr_scale(const ModelInstance& inst) const;  // batch.lr_scaling for its batch
  std::vector<int64_t> dc_batch_sequences() const;   // per dc, sequences per inner step
  int64_t inter_dc_bytes() const;  // all dcs: of the landed rounds (outer methods), else sent
  // Wall time (now, or as read at `wall_s`) outside the main thread's waits on the link.
  double compute_seconds() const { return compute_seconds_at(wall_.seconds()); }
  double compute_seconds_at(double wall_s) const;
  double sim_seconds() const;  // compute time + exposed simulated link time
  double exposed_link_seconds() const;
  void log_step(const StepResult& r, double interval_loss, double interval_s);
  // tokens_ split by the samples every rank drew from each source (collective on the world).
  std::vector<int64_t> count_tokens_by_source();
  JsonObject by_source(const std::vector<int64_t>& values) const;
  JsonObject eval_by_source_json() const;
  // eval.tasks: tokenized by autoloco-prepare on world rank 0 (trainer_tasks.cpp), broadcast.
  void load_tasks();
  // World rank 0: the tasks' ids into RUN/tasks/NAME.ids.jsonl, once the run directory is open.
  void keep_task_ids();
  std::string tokenize_task(const EvalTask& task, const PreparedData& prepared) const;
  // Scores every task on `model` (the anchor), the requests spread over the world's ranks.
  void score_tasks(Decoder& model);
  JsonObject tasks_json() const;
  std::string tasks_progress() const;
  struct LoadedTask;
  void write_task_scores(const LoadedTask& task,
                         const std::vector<ContinuationScore>& scores) const;
  std::vector<JsonObject> sources_json() const;
  // `batches`: each dc's sequences per step in the round just ended.
  void log_round(const RoundStats& s, const std::vector<int64_t>& batches);
  void log_eval(double eval_loss);
  // Bits per byte of an eval loss, from the val shards' prepare.json; NaN without one.
  double eval_bpb(double eval_loss) const;
  void write_summary(const TrainSummary& s);
  std::vector<JsonObject> placement_json() const;
  // Refuses a comm.timeout_s shorter than one sync's modelled link time.
  void check_timeout_covers_sync() const;

  Config config_;
  TrainerOptions options_;
  WatchdogRun watchdog_;  // before the first collective
  MPI_Comm world_;
  Topology topo_;
  std::vector<DcPlacement> placement_;  // every dc's hosts and threads
  torch::Device device_;
  bool bf16_ = false;  // run.precision on this device
  std::unique_ptr<MpiCommunicator> world_comm_;
  std::unique_ptr<MpiCommunicator> intra_mpi_;  // host buffers inside the dc
  std::unique_ptr<MpiCommunicator> inter_mpi_;  // peers with the same member index
  std::unique_ptr<Communicator> grad_comm_;     // NCCL on GPUs, else intra_mpi_'s twin
  ElasticSettings elastic_settings_;            // dc -1: not the elastic mode
  std::unique_ptr<ElasticLink> elastic_;
  // The last committed round's quorum and state hash (syncs.jsonl, summary.json).
  ElasticDecision elastic_last_;
  int elastic_attempts_ = 0;
  double elastic_boundary_s_ = 0.0;  // the last round's wait at its boundary, ready to commit
  std::string elastic_hash_;
  int64_t elastic_heals_ = 0;
  // A join's time until its heal, split (docs/faults.md): reaching the lighthouse, then waiting
  // for the run's next boundary; negative once that heal is logged, or when it was no join.
  double elastic_rendezvous_s_ = -1.0;
  double elastic_join_wait_s_ = -1.0;
  // The step and progress clock of the last commit (what a heal hands on).
  int64_t elastic_commit_step_ = 0;
  int64_t elastic_commit_progress_ = 0;
  std::unique_ptr<WanLink> wan_;
  std::unique_ptr<HierarchicalAllreduce> reducer_;
  StopAgreement stop_;
  std::vector<ModelInstance> instances_;  // instance 0 first; merged ones are removed
  InstanceStreams streams_;  // one CUDA stream per instance (several instances on a GPU)
  std::unique_ptr<GradientSync> grad_sync_;
  std::unique_ptr<SyncPipeline> sync_;
  // The instances to merge when the round that chose them lands (a merge is due then).
  std::optional<std::pair<size_t, size_t>> pending_merge_;
  std::unique_ptr<IntervalController> controller_;
  std::vector<int64_t> dc_batches_;          // per dc, sequences per rank this round
  std::vector<int64_t> last_round_batches_;  // per dc, sequences per step of the last round
  int64_t initial_batch_ = 0;                // sequences per rank and instance of the first round
  int64_t initial_dc_batch_ = 0;             // sequences per rank of the first round, all instances
  int64_t initial_tokens_per_step_ = 1;
  int64_t tokens_ = 0;
  std::unique_ptr<Mixture> data_;
  std::vector<double> eval_by_source_;  // the last evaluation's loss on each source's val
  struct LoadedTask {
    EvalTask config;
    TaskIds ids;
    std::string ids_text;  // the ids file, until keep_task_ids()
    std::unique_ptr<TaskScorer> scorer;
  };
  std::vector<std::unique_ptr<LoadedTask>> tasks_;
  std::vector<TaskResult> task_results_;
  double eval_s_ = 0.0;                    // the last evaluation's wall time: the val loss's
  double tasks_s_ = 0.0;                   // and the tasks'
  std::vector<int64_t> tokens_by_source_;  // at the last metrics line
  std::optional<RunDirectory> run_dir_;
  int64_t step_ = 0;
  int64_t rounds_ = 0;
  // Bytes one dc sent for the rounds that landed (outer methods): what the logs report, the same
  // whenever the communication thread happens to finish.
  int64_t landed_dc_bytes_ = 0;
  int64_t H_ = 0;  // planned length of the current round (with fragments: cycle)
  // Per fragment (one without outer.fragments): its period so far and when it syncs.
  std::vector<SyncPeriod> periods_;
  FragmentSchedule schedule_{1};
  CycleStats cycle_;
  int64_t peak_sync_dc_bytes_ = 0;  // the largest sync, bytes one dc sent
  std::vector<int64_t> h_per_round_;
  LoopState loop_;
  Timer wall_;
  double resumed_wall_s_ = 0.0;  // this rank's wall-clock seconds before the resume
  Timer since_checkpoint_;
  bool timed_checkpoint_asked_ = false;
  int64_t last_checkpoint_step_ = -1;
  std::string resumed_from_;
  TopologyChange topology_change_;    // of the resume (from_dcs == to_dcs: none)
  int64_t baseline_rss_ = 0;          // this rank's resident bytes before the model was built
  int64_t progress_base_step_ = 0;    // progress_step() at the last topology change
  int64_t progress_base_tokens_ = 0;  // tokens_ then
  std::vector<std::string> resume_candidates_;     // find_resume_candidates (every rank)
  std::vector<std::string> rejected_checkpoints_;  // damaged ones a resume passed over (rank 0)
};

}  // namespace autoloco
