// The seam between the Trainer's loop and the outer sync (DESIGN.md, data flow): how a round's
// inter-dc all-reduce runs against the inner steps. The Trainer calls, after every inner step,
// poll() (a sync due now is applied), then end_round() when the step ended a round; it learns
// of a round's statistics when they arrive, which for a blocking sync is at its end and for an
// overlapped one outer.overlap_steps later. Implementations: blocking_sync (DiLoCo as written)
// and overlapped_sync (Streaming DiLoCo's overlap on a communication thread).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>

#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/wan_link.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/round_stats.hpp"
#include "autoloco/train/fragmented_outer.hpp"
#include "autoloco/util/timer.hpp"

namespace autoloco {

// An overlapped round whose all-reduce has finished but whose outer step is not applied yet:
// what a checkpoint keeps so that the resume applies it at the same step (its Σ w_i Δ_i lies in
// the staging() of its fragment's OuterSync).
struct PendingSync {
  int64_t due_step = 0;
  StagedRound round;
  double handed_at = 0.0;  // this rank's compute clock when the sync was handed over
};

// The pipeline's share of the clocks (checkpoints keep it).
struct SyncClock {
  double wait_s = 0.0;          // main-thread seconds blocked on inter-dc syncs
  double exposed_link_s = 0.0;  // simulated link seconds that no compute covered
};

class SyncPipeline {
 public:
  virtual ~SyncPipeline() = default;

  // After inner step `step` (every rank together): applies the sync that is due at `step`.
  virtual std::optional<RoundStats> poll(FlatParams& params, int64_t step) = 0;
  // The round (with fragments: the period of fragment in.fragment) that ended with inner step
  // `step` starts its sync; returns its statistics if they arrived already (blocking).
  virtual std::optional<RoundStats> end_round(FlatParams& params, const RoundInput& in,
                                              int64_t step) = 0;
  // Applies the sync in flight now, whatever its due step: the run's end, or a round that
  // ends before its predecessor's result was applied.
  virtual std::optional<RoundStats> flush(FlatParams& params) = 0;
  // Waits for the sync in flight and keeps its result unapplied (checkpoints, the run's end).
  virtual std::optional<PendingSync> settle() = 0;
  // Takes back a pending result that a checkpoint kept (its sum already in staging()).
  virtual void restore(const PendingSync& pending) = 0;
  // A sync has been started and not yet applied.
  virtual bool in_flight() const = 0;

  virtual SyncClock clock() const = 0;
  virtual void restore_clock(const SyncClock& clock) = 0;
  // One line for the start log.
  virtual std::string describe() const = 0;

  virtual FragmentedOuter& outer() = 0;
  const FragmentedOuter& outer() const { return const_cast<SyncPipeline*>(this)->outer(); }
};

// Blocking for outer.overlap_steps = 0, overlapped otherwise. `intra` spans the dc (the
// overlapped pipeline duplicates it for its thread), `link` the inter-dc peers; `wall` is the
// run's clock, from which compute time is measured.
std::unique_ptr<SyncPipeline> make_sync_pipeline(const Config& config, FlatParams& params,
                                                 MpiCommunicator& intra, WanLink& link,
                                                 torch::Device state_device, const Timer& wall,
                                                 OuterSharding sharding = {});

}  // namespace autoloco
