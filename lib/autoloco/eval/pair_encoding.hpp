// A scoring request's token ids as lm-evaluation-harness's hf backend makes them
// (api/model.py _encode_pair; third_party/notes/lm-eval.md, section 2.2): the context's trailing
// whitespace moves to the front of the continuation, the context is encoded alone and together
// with the continuation, and the continuation's ids are the joint encoding past the context's
// length. A merge across the boundary thus belongs to the context, as in the harness.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/data/tokenizer.hpp"

namespace autoloco {

struct PairIds {
  std::vector<uint32_t> context;
  std::vector<uint32_t> continuation;
};

// One PairIds per (context, continuation), in order; the texts go to the tokenizer in one batch
// (a Hugging Face tokenizer's helper process is asked once). An empty context (after its
// whitespace moved) or a continuation left without ids throws DataError naming the request as
// `describe(i)` does (by default "request i").
std::vector<PairIds> encode_pairs(const Tokenizer& tokenizer,
                                  const std::vector<std::pair<std::string, std::string>>& requests,
                                  const std::function<std::string(size_t)>& describe = {});

}  // namespace autoloco
