// The plan of a run on machines we do not have (`autoloco-train --plan`, docs/sharding.md
// "Planning memory"): the bytes each rank keeps, by class, for each topology.shard mode; the
// bytes and modelled link seconds of one sync on the configured wan; and the compute
// utilisation they leave at the config's interval. Everything comes from the config alone
// (model_specs.hpp counts the parameters): nothing is allocated and no MPI is needed. The
// trainer's start log reports plan_memory's figures for the run it starts, so the rules live
// here once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/comm/link_traffic.hpp"
#include "autoloco/comm/wire_format.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {

// Bytes per rank, by what they hold.
struct MemoryClasses {
  int64_t parameters = 0;   // the fp32 replica(s)
  int64_t gradients = 0;    // fp32 gradients, whole or this member's reduced shard
  int64_t optimizer = 0;    // the inner optimizer's state and its update's scratch
  int64_t outer_state = 0;  // the anchor and the outer momentum
  int64_t residuals = 0;    // error feedback's fp32 residual
  int64_t buffers = 0;      // staging and communication buffers
  // An estimate, not a count: one micro-batch's activations after Korthikanti et al. 2022,
  // "Reducing Activation Recomputation in Large Transformer Models" (activation_bytes).
  int64_t activations = 0;
  // Of the above, what a GPU run keeps in host memory (the outer state when
  // outer.state_device puts it there, host staging, residuals); 0 on the CPU, where
  // everything is host memory.
  int64_t host = 0;

  int64_t total() const;
  // What must fit in the accelerator's memory (all of it on the CPU).
  int64_t device() const { return total() - host; }
};

// The classes as a JSON object (summary.json's memory_per_rank, autoloco-bench --shard).
JsonObject memory_classes_json(const MemoryClasses& m);

// The topology.shard modes the planner compares, in the order of its table.
const std::vector<std::string>& plan_shard_modes();

// Bytes per rank of `config` (its model as loaded, a preset applied) with topology.shard =
// `shard` and `ranks_per_dc` members per dc, on a GPU (`gpu`) or the CPU. The rules are in
// memory_plan.cpp, each with why; docs/sharding.md gives them as formulas.
// `dcs`: the dcs of the job, whose inter-dc all-reduce keeps its receive and packed buffers
// when there are several.
MemoryClasses plan_memory(const Config& config, const std::string& shard, int ranks_per_dc,
                          bool gpu, int dcs = 1);

// topology.shard full's units, in floats: the largest execution unit (a tied head with the
// embedding), whose gradient a backward produces at once, and the most storage gathered at once
// (a unit and the one prefetched beside it).
int64_t largest_execution_unit(const ModelConfig& model);
int64_t gathered_peak(const ModelConfig& model);

// Activations of one micro-batch of `micro_batch` sequences of model.seq_len tokens, after
// Korthikanti et al. 2022 (Eq. 2, no tensor or sequence parallelism, no recomputation) without
// its dropout masks, which our blocks do not have: s b d (32 + 4 a s / d) bytes per layer at 16
// bits, twice that when activations are fp32 (`half` false). Their GPT block has a 4 d MLP and
// stores the a s² attention scores; a llama block's SwiGLU width, a fused attention kernel that
// keeps no scores, and the logits (s b vocab) are not in it: an estimate. With model.recompute
// blocks a block keeps its input (s b d values) and one block's activations exist at a time.
int64_t activation_bytes(const ModelConfig& model, int64_t micro_batch, bool half);

// One sync on the inter-dc link (or, for outer.method ddp, one step's gradient all-reduce).
struct LinkPlan {
  int dcs = 1;
  int members = 1;           // ranks per dc, each sending its own shard
  int syncs = 1;             // syncs per interval of H steps (outer.fragments; ddp: 1 per step)
  int64_t shard_values = 0;  // each member's shard of one sync
  int64_t pieces = 0;        // all-reduces the shard goes in (1 GiB each at most)
  // One dc's message of one sync: members x (the shard's encoding + the scalars), what the
  // start log calls "per dc per sync" and summary.json's inter_dc_bytes adds up.
  int64_t message_bytes = 0;
  // What one dc hands the link in that sync: members x what its ring or compressed all-reduce
  // sends, about 2 (G - 1) / G of the message.
  int64_t sent_bytes = 0;
  double seconds = 0.0;  // the WAN model's link seconds of the sync
};

// The sync of `config` on its wan among world_size / topology.ranks_per_dc dcs: the whole model
// (or one of outer.fragments, ceil(P / fragments) values) sharded over the dc's members, in
// outer.wire_dtype, with the round's scalars, as HierarchicalAllreduce and WanLink carry it.
LinkPlan plan_link(const Config& config, int world_size);

// The traffic of one rank's inter-dc all-reduce of `count` values and `k` scalars among `dcs`
// ranks, for rank `rank`: RingAllreduce::traffic for fp32 and bf16, CompressedAllreduce::traffic
// for the block formats. Those need a communicator of `dcs` ranks; this is the same arithmetic
// without one (tests/mpi/test_plan_link.cpp checks that they agree).
LinkTraffic planned_traffic(size_t count, const WireCodec& codec, size_t k, int dcs, int rank = 0);

// Compute utilisation over an interval of H steps of `step_s` compute seconds each, with
// `syncs` syncs of `sync_s` link seconds, each overlapped by `overlap_steps` steps:
// H t / (H t + syncs max(0, sync_s - tau t)) (ALGORITHMS.md §4, link-aware interval).
double planned_utilisation(int64_t H, double step_s, int syncs, double sync_s,
                           int64_t overlap_steps);

}  // namespace autoloco
