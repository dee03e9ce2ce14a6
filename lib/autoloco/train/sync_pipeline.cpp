#include "autoloco/train/sync_pipeline.hpp"

#include "autoloco/train/blocking_sync.hpp"
#include "autoloco/train/overlapped_sync.hpp"

namespace autoloco {

std::unique_ptr<SyncPipeline> make_sync_pipeline(const Config& config, FlatParams& params,
                                                 MpiCommunicator& intra, WanLink& link,
                                                 torch::Device state_device, const Timer& wall,
                                                 OuterSharding sharding) {
  if (config.outer.overlap_steps == 0) {
    return std::make_unique<BlockingSync>(config, params, intra, link, state_device, sharding);
  }
  return std::make_unique<OverlappedSync>(config, params, intra, link, state_device, wall,
                                          sharding);
}

}  // namespace autoloco
