// ZeRO stage 2 (topology.shard gradients): the gradient is reduce-scattered bucket by bucket
// while backward produces it, and each parameter's gradient is freed once its bucket holds it,
// so a member keeps its shard of the mean gradient and a few buckets, never the whole gradient.
#pragma once

#include <memory>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/shard_span.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/train/inner_shard.hpp"

namespace autoloco {

// `params` built without flat gradients (keeps_flat_gradient(gradients) is false). Registers a
// hook on every parameter: the shard must be destroyed with the model it was made for (the
// ModelInstance owns both), and backward must not run after it is gone.
std::unique_ptr<InnerShard> make_gradient_shard(FlatParams& params, Communicator& intra,
                                                ShardSpan span);

}  // namespace autoloco
