// One rank's forward and backward of one inner step: the step's batch in plan.accum equal
// micro-batches whose gradients add up to exactly those of the whole batch (switch mode), and
// the rank's gradient samples for the batch tests of an adaptive batch (ALGORITHMS.md §3).
#pragma once

#include <torch/torch.h>

#include "autoloco/data/stream.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/sched/batch_controller.hpp"
#include "autoloco/sched/gradient_noise.hpp"

namespace autoloco {

class GradientSamples;

// Zeroes the gradients, then accumulates the mean gradient of plan.batch sequences drawn from
// `stream` into params.grads(). Returns the mean loss of those sequences as a 0-dim double
// tensor on `device`, unread: reading it here would stall a GPU's queue before the gradient
// all-reduce and the optimizer are enqueued. `samples`, when given, snapshots what it needs
// between micro-batches; `bf16` runs each micro-batch's forward under bf16 autocast.
torch::Tensor forward_backward_async(Decoder& model, FlatParams& params, BatchStream& stream,
                                     const BatchPlan& plan, torch::Device device,
                                     GradientSamples* samples = nullptr, bool bf16 = false);

// The same, with the loss read.
double forward_backward(Decoder& model, FlatParams& params, BatchStream& stream,
                        const BatchPlan& plan, torch::Device device,
                        GradientSamples* samples = nullptr, bool bf16 = false);

// A host batch on `device`: on a GPU through pinned memory and an asynchronous copy, so the
// host goes on enqueueing work while the copy waits its turn on the stream.
torch::Tensor to_device(const torch::Tensor& host, torch::Device device);

// A rank's gradient samples: its own batch gradient before the intra-dc all-reduce (a dc of
// several ranks), or the two halves of its micro-batches (a dc of one rank). One extra gradient
// buffer either way, whatever the accumulation.
class GradientSamples {
 public:
  // `count_mean`: this rank adds the dc-wide terms to the sums (one member per dc).
  GradientSamples(int64_t per_rank, bool count_mean)
      : per_rank_(per_rank), count_mean_(count_mean) {}

  // After `done` of `accum` micro-batches (forward_backward calls it).
  void after_micro_batch(FlatParams& params, int64_t done, int64_t accum);
  // After the last micro-batch, before the gradients are all-reduced.
  void before_sync(FlatParams& params);
  // After the all-reduce, when params.grads() is the dc's mean ḡ: adds this step to `sums`.
  void after_sync(FlatParams& params, NoiseSums& sums);
  // The same in two halves, so that a step reads the device once: the step's dot products
  // ‖ḡ‖², ‖s‖², ⟨s,ḡ⟩ (s the sample), enqueued as one double tensor of kProducts values...
  static constexpr int64_t kProducts = 3;
  torch::Tensor products(FlatParams& params) const;
  // ...and, once they are read, this step's terms added to `sums`.
  void add_step(const double* products, NoiseSums& sums) const;

 private:
  int64_t per_rank_;
  bool count_mean_;
  torch::Tensor sample_;  // per_rank 1: the local gradient; 2: the first half's
};

}  // namespace autoloco
