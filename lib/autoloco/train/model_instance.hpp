// A model instance of a rank: its replica, inner optimizer, data stream, batch controller and
// gradient samples. A rank trains one, or with batch.instances > 1 several on disjoint streams
// (AdLoCo's multi-instance training, ALGORITHMS.md §3), whose batch-weighted average is the dc's
// replica at a round's end and which are merged pairwise over the run until one remains.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/stream.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/inner_optimizer.hpp"
#include "autoloco/sched/batch_controller.hpp"
#include "autoloco/train/batch_step.hpp"
#include "autoloco/train/inner_shard.hpp"

namespace autoloco {

struct ModelInstance {
  int id = 0;  // 0 .. batch.instances − 1; instance 0 is never merged away
  Decoder model{nullptr};
  std::unique_ptr<FlatParams> params;
  std::unique_ptr<InnerShard> shard;  // what this member keeps of the gradient (topology.shard)
  std::unique_ptr<InnerOptimizer> optimizer;  // over shard->view()
  std::unique_ptr<BatchStream> stream;
  std::unique_ptr<BatchController> batch;
  std::unique_ptr<GradientSamples> samples;  // when the batch controller tests the noise
  NoiseSums round_noise;                     // this rank's share of the round's sums
  double demand = NAN;                       // the last round's test answer (sequences per rank)
};

// Where instance `id` of a rank reads: its own stream, keyed apart from every other rank's
// and instance's; instance 0 reads the rank's stream of a run without instances.
int instance_stream_member(int id, int member, int ranks_per_dc);

// The batch-weighted mean of the instances' values (b_i: their current batches) into
// instances[0]'s values: the dc's replica at a round's end.
void average_into_first(std::vector<ModelInstance>& instances);

// The pair to merge (indices into `demands`, first < second): the two smallest demands, a NaN
// demand counting as `batches`' value (no answer: as much as it has).
std::pair<size_t, size_t> merge_pair(const std::vector<double>& demands,
                                     const std::vector<int64_t>& batches);

// Merges `from` into `into` weighted by their batches b_i, b_j: values and AdamW moments become
// (b_i x_i + b_j x_j) / (b_i + b_j), the AdamW step count the larger one, and `into` takes the
// batch b_i + b_j as its controller plans it (BatchController::absorbed). `into` keeps its data
// stream.
void merge_instances(ModelInstance& into, const ModelInstance& from);

}  // namespace autoloco
