// Test support: the tokens of a prepared split (OUT/<split>_*.bin) read back, and as text for
// byte tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/data/dataset.hpp"
#include "autoloco/data/tokenizer.hpp"

namespace autoloco::test {

inline std::vector<uint32_t> split_tokens(const std::filesystem::path& dir,
                                          const std::string& split, int64_t vocab_size) {
  const TokenDataset data({(dir / (split + "_*.bin")).string()}, vocab_size, "data." + split);
  std::vector<uint32_t> tokens;
  for (const auto& shard : data.shards()) {
    for (uint64_t i = 0; i < shard.size(); ++i)
      tokens.push_back(shard.token(i));
  }
  return tokens;
}

// A split of byte tokens decoded back to text.
inline std::string decode_split(const std::filesystem::path& dir, const std::string& split) {
  return decode_bytes(split_tokens(dir, split, kByteVocabSize));
}

}  // namespace autoloco::test
