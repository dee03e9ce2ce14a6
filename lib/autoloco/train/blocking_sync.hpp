// DiLoCo's sync as written (outer.overlap_steps = 0): at a round's end every rank stops for the
// whole inter-dc all-reduce, the outer step and the reset of the replica to the new anchor.
// Every second of link time is exposed.
#pragma once

#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/train/sync_pipeline.hpp"

namespace autoloco {

class BlockingSync final : public SyncPipeline {
 public:
  BlockingSync(const Config& config, FlatParams& params, MpiCommunicator& intra, WanLink& link,
               torch::Device state_device, OuterSharding sharding = {});

  std::optional<RoundStats> poll(FlatParams&, int64_t) override { return std::nullopt; }
  std::optional<RoundStats> end_round(FlatParams& params, const RoundInput& in,
                                      int64_t step) override;
  std::optional<RoundStats> flush(FlatParams&) override { return std::nullopt; }
  std::optional<PendingSync> settle() override { return std::nullopt; }
  void restore(const PendingSync& pending) override;
  bool in_flight() const override { return false; }
  // The sync's waiting is the link's own wall time (the transfer, and the sleep in sleep mode).
  SyncClock clock() const override { return {link_.wall_seconds(), exposed_s_}; }
  void restore_clock(const SyncClock& clock) override { exposed_s_ = clock.exposed_link_s; }
  std::string describe() const override;
  FragmentedOuter& outer() override { return outer_; }

 private:
  WanLink& link_;
  HierarchicalAllreduce reducer_;
  FragmentedOuter outer_;
  double exposed_s_ = 0.0;
};

}  // namespace autoloco
