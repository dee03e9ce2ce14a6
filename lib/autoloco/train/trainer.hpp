// The Trainer owns the training loop and is the only place that knows the order of events in a
// step: batches from the rank's own stream, forward/backward, intra-dc gradient all-reduce,
// clipping, AdamW at the scheduled lr, evaluation, metrics and the stop protocol.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/stop_agreement.hpp"
#include "autoloco/comm/topology.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/data/stream.hpp"
#include "autoloco/metrics/run_directory.hpp"
#include "autoloco/model/gpt.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/util/timer.hpp"

namespace autoloco {

struct TrainerOptions {
  bool write_run_directory = true;  // tests and benchmarks may run without one
  bool print_progress = true;
};

struct StepResult {
  double loss = 0.0;  // this rank's mean micro-batch loss of the step
  double lr = 0.0;
  double grad_norm = 0.0;  // dc-wide gradient norm before clipping
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t tokens = 0;  // all ranks
  double final_train_loss = NAN;
  double final_eval_loss = NAN;
  double wall_s = 0.0;
  bool stopped_by_signal = false;
};

class Trainer {
 public:
  Trainer(const Config& config, MPI_Comm world, TrainerOptions options = {});
  ~Trainer();

  // The whole run: steps, periodic eval, metrics, summary. Stops early (cleanly, on every rank at
  // the same step) when a stop signal arrives.
  TrainSummary train();

  // One inner step (all ranks of the dc must call it together).
  StepResult train_step();

  // Mean validation loss over run.eval_batches batches, spread over the world's ranks.
  double evaluate();

  const Topology& topology() const { return topo_; }
  FlatParams& params() { return *params_; }
  GPT& model() { return model_; }
  int64_t step() const { return step_; }
  int64_t tokens_per_step() const;  // all ranks

 private:
  void set_threads();
  void log_start() const;
  void allreduce_gradients();
  double world_mean(double value);
  void log_step(const StepResult& r, double interval_loss, double interval_s);
  void log_eval(double eval_loss);
  void write_summary(const TrainSummary& s);

  Config config_;
  TrainerOptions options_;
  MPI_Comm world_;
  Topology topo_;
  std::unique_ptr<MpiCommunicator> world_comm_;
  std::unique_ptr<MpiCommunicator> intra_dc_;
  StopAgreement stop_;
  GPT model_;
  std::unique_ptr<FlatParams> params_;
  std::unique_ptr<FlatAdamW> optimizer_;
  std::unique_ptr<TokenDataset> train_data_;
  std::unique_ptr<TokenDataset> val_data_;
  std::unique_ptr<BatchStream> stream_;
  std::optional<RunDirectory> run_dir_;
  torch::Device device_;
  int64_t step_ = 0;
  Timer wall_;
};

}  // namespace autoloco
