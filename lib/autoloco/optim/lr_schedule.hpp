// The inner learning-rate schedule: linear warm-up, then constant or cosine decay to a floor.
#pragma once

#include <cstdint>

#include "autoloco/config/config.hpp"

namespace autoloco {

// Learning rate of the step about to be taken; `step` is its 0-based index.
//   step < warmup:        lr (step + 1) / warmup        (never 0, reaches lr at the last warm-up
//   step) "constant":           lr "cosine":             min_lr + (lr - min_lr) (1 + cos(pi p)) /
//   2,  min_lr = min_lr_ratio lr,
//                         p = (step - warmup) / (total_steps - warmup) clamped to [0, 1]
// so the cosine starts at lr right after warm-up, is halfway at p = 0.5 and stays at min_lr from
// step total_steps on. Throws ConfigError on an unknown schedule name.
double inner_lr(const InnerConfig& config, int64_t step, int64_t total_steps);

}  // namespace autoloco
