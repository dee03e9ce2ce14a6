// model.recompute blocks (activation checkpointing, Chen et al. 2016; ALGORITHMS.md §5): each
// transformer block keeps only its input for backward and runs its forward again there, so the
// activations held between forward and backward are one hidden state per block instead of
// every intermediate of every block. The embedding and the head run as they are. The gradients
// are those of recompute none bit for bit on the CPU: the recomputed forward is the same
// arithmetic, and its backward accumulates into the same parameters in the same order.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "autoloco/model/decoder.hpp"

namespace autoloco {

enum class Recompute { none, blocks };

// Throws ConfigError (model.recompute) for another name.
Recompute parse_recompute(const std::string& name);

// The runner of recompute blocks; `bf16` (run.precision) is re-entered for the recomputed
// forward, which backward may run on another thread (a GPU's autograd thread).
std::shared_ptr<UnitRunner> make_recompute_runner(torch::Device device, bool bf16);

}  // namespace autoloco
