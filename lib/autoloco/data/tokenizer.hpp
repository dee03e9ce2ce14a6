// Byte-level tokenizer: every byte is its own token (vocabulary 256). No training, no
// unknown tokens, and any text round-trips exactly, which keeps the data path easy to trust.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace autoloco {

inline constexpr int64_t kByteVocabSize = 256;

std::vector<uint32_t> encode_bytes(std::string_view text);

// Throws DataError on an id >= 256 (tokens from another tokenizer).
std::string decode_bytes(const std::vector<uint32_t>& tokens);

}  // namespace autoloco
