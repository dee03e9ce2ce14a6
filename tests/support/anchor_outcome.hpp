// What the equal-results tests of the shard modes compare: a whole run's final anchor (gathered
// when sharded), its final eval loss and its rounds.
#pragma once

#include <mpi.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>

#include "autoloco/config/config.hpp"
#include "autoloco/train/trainer.hpp"

namespace autoloco::test {

struct Outcome {
  torch::Tensor anchor;
  double eval_loss = NAN;
  int64_t rounds = 0;
};

// Trains `c` on MPI_COMM_WORLD without a run directory or progress lines.
inline Outcome train_outcome(const Config& c) {
  TrainerOptions o(/*write_run_directory=*/false, /*print_progress=*/false);
  Trainer trainer(c, MPI_COMM_WORLD, o);
  const TrainSummary s = trainer.train();
  return {trainer.anchor().clone(), s.final_eval_loss, s.rounds};
}

}  // namespace autoloco::test
