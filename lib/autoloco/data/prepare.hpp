// Corpus preparation behind autoloco-prepare: text files, json lines (plain, gzip, zstd) and
// parquet files -> documents (pieces of text files, rows of the others) -> train/val split ->
// tokens (bytes, a SentencePiece model trained on the training split or given, or a Hugging
// Face tokenizer.json) -> token shards plus prepare.json (and tokenizer.model or
// tokenizer.json). In the library so that tests can drive it directly.
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
  // Filename suffixes to keep, e.g. {".rst", ".txt"}; empty keeps json lines and parquet files
  // (input_format.hpp) and files that look like text (no NUL byte in the first 4 KiB).
  std::vector<std::string> extensions;
  // Json lines and parquet: the field (column) that holds a document's text.
  std::string text_field = "text";
  // Leave out bad rows (and the rest of a damaged file) with a count in the report, instead of
  // stopping at the first.
  bool skip_bad = false;
  // Expected share of documents in the validation split, in (0, 1).
  double val_fraction = 0.05;
  // Maximum tokens per shard.
  uint64_t shard_tokens = 8388608;
  // Seeds the per-document split (and SentencePiece's sampling); the same seed and inputs give
  // the same split.
  uint64_t seed = 1337;
  // Files longer than this are cut into documents (documents.hpp); 0 = auto: whole files when
  // there are enough of them for the val split, else a size that gives it about 20 documents.
  uint64_t doc_bytes = 0;
  // "bytes" (vocabulary 256), "sentencepiece" or "hf".
  std::string tokenizer = "bytes";
  // SentencePiece: train a model of this vocabulary on the training split (when sp_model is
  // empty) ...
  int64_t vocab_size = 0;
  std::string sp_model_type = "bpe";  // bpe or unigram
  // ... or use this model file.
  std::string sp_model;
  // hf: the tokenizer.json to encode with (copied to out_dir), and the Python interpreter whose
  // tokenizers package encodes (hf_tokenizer.hpp; empty: default_hf_python()).
  std::string hf_tokenizer;
  std::string hf_python;
  // Threads that tokenize (and train); 0 = every core.
  int threads = 0;
  // Replace shards already in out_dir instead of refusing.
  bool overwrite = false;
};

struct PrepareReport {
  size_t files = 0;            // input files read
  size_t row_files = 0;        // of them, json lines and parquet files
  uint64_t skipped_rows = 0;   // bad rows left out (skip_bad)
  uint64_t skipped_tails = 0;  // damaged files whose rest was left out (skip_bad)
  std::vector<std::string> skipped_examples;
  size_t skipped_files = 0;  // walked files left out by the filters
  size_t documents = 0;
  size_t train_documents = 0;
  size_t val_documents = 0;
  uint64_t doc_bytes = 0;   // the cut size in force (see PrepareOptions::doc_bytes)
  bool whole_files = true;  // whether every file stayed one document
  uint64_t bytes = 0;       // input bytes, separators not included
  // The bytes each split's tokens stand for: its documents plus one separator each.
  uint64_t train_bytes = 0;
  uint64_t val_bytes = 0;
  uint64_t train_tokens = 0;
  uint64_t val_tokens = 0;
  std::vector<std::string> train_shards;
  std::vector<std::string> val_shards;
  // -sum p ln p over the token frequencies of the val split: the loss per token of the best
  // model that ignores context. The trainer's acceptance bound is 60% of it (bytes).
  double val_unigram_entropy_nats = 0.0;
  std::string tokenizer = "bytes";
  int64_t vocab_size = 256;
  int token_bits = 16;  // the shards' token width
  // "tokenizer.model" (sentencepiece) or "tokenizer.json" (hf) next to the shards, or empty
  std::string tokenizer_model;
  std::string sp_model_type;       // bpe/unigram when trained here, "given" for --sp-model
  std::string hf_library_version;  // hf: the version of the Python tokenizers that encoded
  double tokenize_s = 0.0;         // seconds spent encoding (not reading or writing)
  double train_tokenizer_s = 0.0;
  std::vector<std::string> warnings;

  // Bytes of text per token in the val split: what turns a loss into bits per byte.
  double val_bytes_per_token() const {
    return val_tokens > 0 ? static_cast<double>(val_bytes) / static_cast<double>(val_tokens) : 0;
  }
};

// Each document is followed by a newline (one byte token, or the subword tokenizer's tokens
// for "\n" on its own). Throws DataError on bad inputs or a non-empty out_dir.
PrepareReport prepare_corpus(const PrepareOptions& options);

// -sum p ln p in nats over the non-zero counts; 0 for no data.
double unigram_entropy_nats(const std::vector<uint64_t>& counts);
double unigram_entropy_nats(const std::array<uint64_t, 256>& counts);

// True when the first 4 KiB of the file hold no NUL byte.
bool looks_like_text(const std::string& path);

}  // namespace autoloco
