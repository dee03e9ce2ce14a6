// Corpus preparation behind autoloco-prepare: text files -> byte tokens -> train/val token
// shards plus prepare.json. In the library so that tests can drive it directly.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace autoloco {

struct PrepareOptions {
  // Files or directories; directories are walked recursively in sorted order (regular files
  // only). Files named here are always taken; the filters below apply to walked files.
  std::vector<std::string> inputs;
  // Where train_NNN.bin, val_NNN.bin and prepare.json go (the quickstart config reads here).
  std::string out_dir = "data/pydoc";
  // Filename suffixes to keep, e.g. {".rst", ".txt"}; empty keeps files that look like text
  // (no NUL byte in the first 4 KiB).
  std::vector<std::string> extensions;
  // Expected share of files in the validation split, in (0, 1).
  double val_fraction = 0.05;
  // Maximum tokens per shard.
  uint64_t shard_tokens = 8388608;
  // Seeds the per-file split; the same seed and file names give the same split.
  uint64_t seed = 1337;
  // Replace shards already in out_dir instead of refusing.
  bool overwrite = false;
};

struct PrepareReport {
  size_t files = 0;          // documents read
  size_t skipped_files = 0;  // walked files left out by the filters
  size_t train_files = 0;
  size_t val_files = 0;
  uint64_t bytes = 0;  // input bytes, separators not included
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
  std::vector<std::string> train_shards;
  std::vector<std::string> val_shards;
  // -sum p ln p over the byte frequencies of the val split: the loss of the best model that
  // ignores context. The trainer's acceptance bound is 60% of it.
  double val_unigram_entropy_nats = 0.0;
  int64_t vocab_size = 256;
};

// Each document is followed by one newline byte, so a split's token count is its bytes
// plus its number of files. Throws DataError on bad inputs or a non-empty out_dir.
PrepareReport prepare_corpus(const PrepareOptions& options);

// -sum p ln p in nats over the non-zero counts; 0 for no data.
double unigram_entropy_nats(const std::array<uint64_t, 256>& counts);

// True when the first 4 KiB of the file hold no NUL byte.
bool looks_like_text(const std::string& path);

}  // namespace autoloco
