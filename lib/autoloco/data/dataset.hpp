// A split of the corpus (data.train or data.val): the token shards matched by a list of
// paths or globs, opened and checked against the model's vocabulary once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autoloco/data/prepared_data.hpp"
#include "autoloco/data/shard.hpp"

namespace autoloco {

class TokenDataset {
 public:
  // `patterns` are paths or glob(3) patterns; the matches are sorted and deduplicated.
  // `what` names the config key ("data.train", "data.val") in error messages. Where the shards
  // have a prepare.json beside them, its tokenizer must have exactly `vocab_size` tokens.
  TokenDataset(const std::vector<std::string>& patterns, int64_t vocab_size, std::string what);

  uint64_t num_tokens() const { return num_tokens_; }
  size_t num_shards() const { return shards_.size(); }
  const std::vector<Shard>& shards() const { return shards_; }
  const std::string& what() const { return what_; }
  // What autoloco-prepare recorded about these shards; nullopt for shards made elsewhere.
  const std::optional<PreparedData>& prepared() const { return prepared_; }

 private:
  std::string what_;
  std::vector<Shard> shards_;
  uint64_t num_tokens_ = 0;
  std::optional<PreparedData> prepared_;
};

// Expands paths or globs into a sorted, deduplicated file list; a pattern without a match
// is a DataError naming it. `what` names the config key in messages.
std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& patterns,
                                               const std::string& what);

}  // namespace autoloco
