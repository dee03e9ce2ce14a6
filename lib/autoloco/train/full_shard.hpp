// The InnerShard of topology.shard full (ZeRO stage 3): the member's shard of the parameters and
// of the gradient, with the decoder's units gathered around their forward and backward
// (gathered_units.hpp). No member ever holds the whole replica: there is nothing to refresh
// after the optimizer steps the shard.
#pragma once

#include <memory>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/shard_span.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/train/inner_shard.hpp"
#include "autoloco/train/recompute.hpp"

namespace autoloco {

// `params` keeps this member's span of `intra`'s split (FlatParams' full-shard constructor);
// the model's runner becomes the gathered units. With `samples` (the adaptive batch's tests) each
// member also keeps every member's own gradient on its shard: [members, shard] floats, about one
// whole gradient, for the tests' products (InnerShard::sample_products).
std::unique_ptr<InnerShard> make_full_shard(DecoderImpl& model, FlatParams& params,
                                            Communicator& intra, Recompute recompute, bool bf16,
                                            bool samples);

}  // namespace autoloco
