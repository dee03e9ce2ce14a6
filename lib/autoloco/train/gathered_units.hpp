// topology.shard full (ZeRO stage 3, FSDP inside a dc; ALGORITHMS.md §5, docs/sharding.md):
// member m keeps only shard m of the flat parameter buffer (the same split as every other
// shard mode and the hierarchical outer all-reduce). Each unit of the decoder (embedding, block,
// head: decoder.hpp) runs as one autograd function that all-gathers the unit's parameters into
// the unit's storage just before its forward and frees them after, gathers them again for its
// backward, and reduce-scatters its gradient into the member's shard as soon as backward has
// produced it. While a unit computes, the gather of the next one (forward) or the previous one
// (backward) is in flight: a non-blocking MPI all-gather on the CPU, the NCCL calls on a side
// stream ordered by events on a GPU, where the reduce-scatters run on that stream too. A member
// so holds its shard, its gradient shard and at most
// two units' parameters at once (three when a tied head also gathers the embedding).
//
// With model.recompute blocks a block keeps only its input and runs its forward again in
// backward; with none it keeps its activations, whose saved views of the unit's parameters
// point into the unit's storage: that storage is freed after forward and filled again, in
// place, by the gather before backward (as FSDP does), so the saved graph reads the same values.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/shard_span.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/train/recompute.hpp"
#include "autoloco/util/flat_range.hpp"

namespace autoloco {

class GatheredUnits final : public UnitRunner {
 public:
  // `params` keeps `span` (FlatParams' full-shard constructor); `shard_grads` (span.count()
  // floats) receives this member's sum over the dc of each micro-batch's gradient. The
  // module's parameters are re-pointed into the units' storage, which starts freed. With
  // `pieces` ([members, span.count()] floats) the gradients travel by an all-to-all instead of a
  // reduce-scatter and row m accumulates member m's own gradient on this shard, unsummed (the
  // adaptive batch's gradient samples); shard_grads is then left to the caller.
  GatheredUnits(DecoderImpl& model, FlatParams& params, Communicator& intra, ShardSpan span,
                torch::Tensor shard_grads, Recompute recompute, bool bf16,
                torch::Tensor pieces = {});
  ~GatheredUnits() override;
  GatheredUnits(const GatheredUnits&) = delete;
  GatheredUnits& operator=(const GatheredUnits&) = delete;

  torch::Tensor run(DecoderImpl& model, int64_t unit, const torch::Tensor& x) override;

  // Before a step: counts the reductions of each unit afresh.
  void begin_step();
  // After backward: every unit's gradient was reduce-scattered once per forward that built a
  // graph; throws Error naming a unit that was not (a backward that never ran).
  void check_reduced() const;

  // Bytes of unit storage allocated now, and the most at any time since construction.
  int64_t staging_bytes() const { return staging_bytes_; }
  int64_t peak_staging_bytes() const { return peak_staging_bytes_; }
  // Bytes of the largest unit's storage, and of the gradient scratch the reductions keep.
  int64_t largest_unit_bytes() const;
  int64_t scratch_bytes() const;

  // The autograd function's steps (gathered_units.cpp), on one execution unit: the decoder unit
  // `unit`, with the embedding's storage too for a tied head.
  void acquire(int64_t unit);
  void release(int64_t unit);
  void prefetch(int64_t unit);
  bool recomputes(int64_t unit) const;
  // The module parameters of the execution unit, in its storages' order.
  std::vector<torch::Tensor> parameters(int64_t unit) const;
  // `grads` (parameters(unit)'s, undefined for an unused one) reduce-scattered into shard_grads:
  // on a GPU on the side stream, ordered after the compute stream's writes by an event.
  void reduce(int64_t unit, const std::vector<torch::Tensor>& grads);
  // The compute stream waits for the reductions issued so far (on the CPU they are done).
  void await_reductions();
  DecoderImpl& model() { return model_; }
  torch::Device device() const { return device_; }
  bool bf16() const { return bf16_; }
  void count_forward() { ++forwards_; }

 private:
  // A decoder unit's parameters: its decayed ones and its others, each a run of the flat layout
  // (decayed parameters come first in it), in its storage one after the other.
  struct Unit {
    std::vector<FlatRange> ranges;  // one or two runs of the layout
    std::vector<int64_t> at;        // where each run starts in the storage
    int64_t numel = 0;
    std::vector<size_t> params;     // indices into FlatParams::parameters()
    std::vector<int64_t> param_at;  // where each of them starts in the storage
    torch::Tensor storage;          // numel floats; its memory freed while released
    int users = 0;                  // execution units holding it gathered
    std::vector<std::unique_ptr<Communicator::Pending>> pending;  // a gather in flight
    std::optional<c10::Event> gathered;                           // on a GPU: its side stream's
    int64_t reduced = 0;                                          // reductions this step
  };

  void build_units(const std::vector<ParamSlice>& slices);
  void allocate_reduction_buffers();
  std::vector<int64_t> storages_of(int64_t unit) const;
  void allocate(Unit& u);
  void free(Unit& u);
  void start_gather(Unit& u);
  void finish_gather(Unit& u);
  void reduce_unit(Unit& u, const torch::Tensor& grad);
  void exchange_run(const FlatRange& run, const float* grad);

  DecoderImpl& model_;
  FlatParams& params_;
  Communicator& intra_;
  ShardSpan span_;
  torch::Tensor shard_grads_;
  torch::Tensor pieces_;  // [members, shard]: each member's gradient on this shard, or none
  Recompute recompute_;
  bool bf16_;
  torch::Device device_;
  std::vector<Unit> units_;
  torch::Tensor gate_;     // a leaf that requires grad: every unit's function gets a backward
  torch::Tensor grad_;     // a unit's gradient in its storage's layout (reused)
  torch::Tensor scratch_;  // a reduce-scatter's output (an all-to-all's: every member's part)
  std::optional<c10::Stream> side_;    // a GPU's stream for the gathers and the reductions
  std::optional<c10::Event> reduced_;  // on a GPU: the side stream's last reduction
  int64_t staging_bytes_ = 0;
  int64_t peak_staging_bytes_ = 0;
  int64_t forwards_ = 0;  // of units with a graph, this step
};

}  // namespace autoloco
