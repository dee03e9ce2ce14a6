// autoloco-bench --overlap: what the communication thread costs the inner steps while it waits
// on the link. In one process (one dc), the Trainer's inner steps run alone, then while a
// communication thread waits patiently (tests and sleeps, as an overlapped sync's does) on a
// message that arrives only after the timed steps, then while a thread waits in a plain
// MPI_Wait (Open MPI's progress loop: what a busy-polling design would cost). Alone and patient
// alternate R times (median tokens/s, and the median, least and greatest of the R ratios);
// spinning runs once.
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/comm/comm_thread.hpp"
#include "autoloco/comm/patient_wait.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

double time_steps(Trainer& trainer, int64_t steps) {
  Timer t;
  for (int64_t i = 0; i < steps; ++i)
    trainer.train_step();
  return t.seconds();
}

// The steps' seconds while a communication thread waits (with `patient` as an overlapped sync
// does, or spinning in MPI_Wait) for a message that is sent only after them.
double time_with_waiting_thread(Trainer& trainer, int64_t steps, bool patient, MPI_Comm self) {
  CommThread thread;
  int incoming = 0;
  thread.start([&] {
    MPI_Request request = MPI_REQUEST_NULL;
    AUTOLOCO_MPI(MPI_Irecv(&incoming, 1, MPI_INT, 0, 1, self, &request));
    wait_all(&request, 1, WaitPolicy{patient, thread.cancel_flag()});
  });
  const double seconds = time_steps(trainer, steps);
  int outgoing = 1;
  AUTOLOCO_MPI(MPI_Send(&outgoing, 1, MPI_INT, 0, 1, self));
  thread.wait();
  return seconds;
}

}  // namespace

int overlap(const Args& args) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("autoloco-bench-overlap-" + std::to_string(::getpid())))
                              .string();
  const Config c = single_process_config(args, dir);
  Trainer trainer(c, MPI_COMM_SELF, {false, false});
  MPI_Comm self = MPI_COMM_NULL;
  AUTOLOCO_MPI(MPI_Comm_dup(MPI_COMM_SELF, &self));
  time_steps(trainer, args.warmup);

  // Alone and beside the patient thread in pairs, the order swapped every other pair so that a
  // drifting machine weighs on both alike; the ratio is the median of the pairs'. The spinning
  // thread, ten times slower where OpenMP spins too, is measured once.
  std::vector<double> alone, patient, ratios;
  for (int64_t r = 0; r < args.repeats; ++r) {
    double a = 0.0, p = 0.0;
    if (r % 2 == 0) {
      a = time_steps(trainer, args.steps);
      p = time_with_waiting_thread(trainer, args.steps, true, self);
    } else {
      p = time_with_waiting_thread(trainer, args.steps, true, self);
      a = time_steps(trainer, args.steps);
    }
    alone.push_back(a);
    patient.push_back(p);
    ratios.push_back(a / p);
  }
  const double spinning = time_with_waiting_thread(trainer, args.steps, false, self);
  std::sort(ratios.begin(), ratios.end());
  const double median_ratio = ratios[ratios.size() / 2];
  std::sort(alone.begin(), alone.end());
  std::sort(patient.begin(), patient.end());
  const double median_alone = alone[alone.size() / 2];
  MPI_Comm_free(&self);
  const double tokens = static_cast<double>(args.steps * trainer.tokens_per_step());
  JsonObject out;
  out.add("benchmark", "overlap")
      .add("libtorch", TORCH_VERSION)
      .add("model", model_json(c.model, parameter_count(*trainer.model())))
      .add("batch_size", c.data.batch_size)
      .add("threads", int64_t{torch::get_num_threads()})
      .add("steps", args.steps)
      .add("repeats", args.repeats)
      .add("alone_tokens_per_s", tokens / median_alone)
      .add("patient_thread_tokens_per_s", tokens / patient[patient.size() / 2])
      .add("spinning_thread_tokens_per_s", tokens / spinning)
      .add("patient_ratio", median_ratio)
      .add("patient_ratio_min", ratios.front())
      .add("patient_ratio_max", ratios.back())
      .add("spinning_ratio", median_alone / spinning);
  std::printf("%s\n", out.str().c_str());
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace autoloco::bench
