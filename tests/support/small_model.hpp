// The small GPT of the optimizer and precision unit tests: 2 layers, 2 heads, d_model 32,
// 16 positions, 29 tokens (a vocabulary no power of two, so no size lines up by accident).
#pragma once

#include "autoloco/config/config.hpp"

namespace autoloco::test {

inline ModelConfig small_model_config() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 32;
  c.seq_len = 16;
  c.vocab_size = 29;
  return c;
}

}  // namespace autoloco::test
