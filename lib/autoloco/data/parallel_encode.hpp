// Tokenizing many documents on several threads, with the result in document order whatever
// the number of threads: what autoloco-prepare does batch by batch, and what
// autoloco-bench --tokenize measures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/data/tokenizer.hpp"

namespace autoloco {

// tokens[i] are the tokens of texts[i]. Threads take documents one at a time (a long document
// does not hold the others up); the first exception of any thread is rethrown. A tokenizer that
// encodes in batches (Tokenizer::encodes_in_batches) gets them all in one call instead, and
// spreads them over threads of its own.
std::vector<std::vector<uint32_t>> encode_documents(const Tokenizer& tokenizer,
                                                    const std::vector<std::string>& texts,
                                                    int threads);

// `requested` threads, or every core for 0.
int tokenizer_threads(int requested);

}  // namespace autoloco
