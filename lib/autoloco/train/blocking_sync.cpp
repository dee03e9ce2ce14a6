#include "autoloco/train/blocking_sync.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

BlockingSync::BlockingSync(const Config& config, FlatParams& params, MpiCommunicator& intra,
                           WanLink& link, torch::Device state_device, OuterSharding sharding)
    : link_(link),
      reducer_(intra, link),
      outer_(config, params, reducer_, link, state_device, sharding) {}

std::optional<RoundStats> BlockingSync::end_round(FlatParams& params, const RoundInput& in,
                                                  int64_t) {
  const RoundStats s = outer_.at(in.fragment).sync(params, in);
  outer_.stepped(in.fragment);
  exposed_s_ += s.clock_link_s();
  return s;
}

void BlockingSync::restore(const PendingSync&) {
  throw CheckpointError(
      "this checkpoint holds an overlapped sync in flight, which needs outer.overlap_steps > 0 "
      "as when it was written");
}

std::string BlockingSync::describe() const {
  return outer_.size() == 1
             ? "sync: blocking (every rank waits for the inter-dc all-reduce)"
             : fmt::format(
                   "sync: blocking, {} fragments (every rank waits for each fragment's "
                   "inter-dc all-reduce)",
                   outer_.size());
}

}  // namespace autoloco
