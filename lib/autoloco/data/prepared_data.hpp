// What autoloco-prepare recorded about a set of shards (its prepare.json, next to them): the
// tokenizer, its vocabulary, its model file and the val split's bytes per token. The trainer
// reads it to refuse a model whose vocabulary is not the tokenizer's, before any work, and to
// turn eval loss into bits per byte.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace autoloco {

struct PreparedData {
  std::string json_path;  // the prepare.json it came from
  std::string tokenizer;  // "bytes", "sentencepiece" or "hf"
  int64_t vocab_size = 0;
  // Bytes of text per token of the val split; NaN when the file predates it.
  double val_bytes_per_token = std::numeric_limits<double>::quiet_NaN();
  // path of the model file (tokenizer.model, tokenizer.json), or empty (bytes)
  std::string tokenizer_model;
  int64_t tokenizer_model_crc32 = -1;  // -1: not recorded

  // Same tokenizer: name, vocabulary and model contents.
  bool same_tokenizer(const PreparedData& other) const;
  // "sentencepiece tokenizer of vocabulary 4096 (data/x/prepare.json)".
  std::string describe() const;
};

// Reads and checks the prepare.json files in the directories of `shard_paths`; nullopt when none
// has one (shards made by other tools). Throws DataError naming the files when the directories
// disagree on the tokenizer or when the tokenizer model named is missing or damaged; `what`
// names the config key ("data.train").
std::optional<PreparedData> read_prepared_data(const std::vector<std::string>& shard_paths,
                                               const std::string& what);

// Reads one prepare.json (`path`, or the directory that holds it). Throws DataError naming the
// file when it is missing or damaged, or when the tokenizer model it names is.
PreparedData read_prepare_json(const std::string& path);

// Throws DataError when data.train and data.val come from different tokenizers (both known).
void check_same_tokenizer(const std::optional<PreparedData>& train,
                          const std::optional<PreparedData>& val);

// Bits per byte of a loss in nats per token: loss / ln 2 / bytes per token; NaN when the bytes
// per token are unknown.
double bits_per_byte(double loss_nats, double bytes_per_token);

// Throws ConfigError naming model.vocab_size, both values and the file when they differ.
void check_prepared_vocab(const PreparedData& prepared, int64_t vocab_size,
                          const std::string& what);

}  // namespace autoloco
