// Test support: a small learnable byte corpus written as train/val shards, and a tiny config
// that trains on it in seconds on one core.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/data/tokenizer.hpp"

namespace autoloco::test {

// Repetitive English-like text with a few varying words: learnable well below the unigram
// entropy within a few dozen steps.
inline std::string tiny_text(int lines, int salt) {
  static const char* subjects[] = {"the model", "a rank", "every dc", "the anchor", "our loss"};
  static const char* verbs[] = {"trains", "averages", "falls", "syncs", "waits"};
  static const char* objects[] = {"slowly.", "over the link.", "every round.", "in place.",
                                  "at last."};
  std::string text;
  uint64_t x = 88172645463325252ull + static_cast<uint64_t>(salt);
  for (int i = 0; i < lines; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    text += subjects[x % 5];
    text += " ";
    text += verbs[(x >> 8) % 5];
    text += " ";
    text += objects[(x >> 16) % 5];
    text += "\n";
  }
  return text;
}

// Writes <dir>/train_000.bin and <dir>/val_000.bin; returns dir.
inline std::string write_tiny_corpus(const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_shard(dir + "/train_000.bin", encode_bytes(tiny_text(4000, 1)), TokenWidth::u16);
  write_shard(dir + "/val_000.bin", encode_bytes(tiny_text(400, 2)), TokenWidth::u16);
  return dir;
}

inline Config tiny_config(const std::string& data_dir, const std::string& out_dir) {
  return parse_config(
      "", {"model.n_layer=2", "model.n_head=2", "model.d_model=32", "model.seq_len=32",
           "data.batch_size=4", "data.train=" + data_dir + "/train_*.bin",
           "data.val=" + data_dir + "/val_*.bin", "run.steps=40", "run.eval_every=0",
           "run.eval_batches=4", "run.log_every=10", "inner.warmup_steps=5", "inner.lr=0.01",
           "run.out_dir=" + out_dir, "run.threads=1"});
}

}  // namespace autoloco::test
