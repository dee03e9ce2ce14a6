// Tokenizers as autoloco-prepare uses them: text in, token ids out. The byte tokenizer is the
// default: every byte is its own token (vocabulary 256), no training, no unknown tokens, and
// any text round-trips exactly, which keeps the data path easy to trust. The subword ones are
// in sentencepiece_tokenizer.hpp (SentencePiece) and hf_tokenizer.hpp (a Hugging Face
// tokenizer.json).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace autoloco {

inline constexpr int64_t kByteVocabSize = 256;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The name prepare.json records ("bytes", "sentencepiece", "hf").
  virtual std::string name() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Appends the tokens of `text` to `out`. Safe to call from several threads at once.
  virtual void encode(std::string_view text, std::vector<uint32_t>& out) const = 0;
  // Throws DataError on an id outside the vocabulary.
  virtual std::string decode(const std::vector<uint32_t>& tokens) const = 0;
  // Whether encode_documents() (parallel_encode.hpp) should hand a whole batch to
  // encode_batch() rather than call encode() per document on its threads: true for a tokenizer
  // whose every call costs a round trip to another process (HfTokenizer).
  virtual bool encodes_in_batches() const { return false; }
  // The tokens of each text, in order; by default encode() on each, on this thread.
  virtual std::vector<std::vector<uint32_t>> encode_batch(
      const std::vector<std::string>& texts) const;
};

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "bytes"; }
  int64_t vocab_size() const override { return kByteVocabSize; }
  void encode(std::string_view text, std::vector<uint32_t>& out) const override;
  std::string decode(const std::vector<uint32_t>& tokens) const override;
};

std::vector<uint32_t> encode_bytes(std::string_view text);

// Throws DataError on an id >= 256 (tokens from another tokenizer).
std::string decode_bytes(const std::vector<uint32_t>& tokens);

}  // namespace autoloco
