// The subword tokenizer of autoloco-prepare: a SentencePiece model (BPE or unigram), trained
// here on the training split or given as a file. Built only where CMake found Debian's
// libsentencepiece (AUTOLOCO_SENTENCEPIECE); elsewhere every entry point throws a DataError
// that says so, and sentencepiece_available() is false.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autoloco/data/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace autoloco {

bool sentencepiece_available();

struct SentencePieceTrainOptions {
  int64_t vocab_size = 4096;
  std::string model_type = "bpe";  // bpe or unigram
  int threads = 1;
  // At most this many lines are sampled from the training text (SentencePiece's
  // input_sentence_size); 0 takes them all. Lines longer than 4192 bytes are skipped.
  uint64_t max_sentences = 2000000;
  uint32_t seed = 1337;
};

// Sets `line` to the next line of training text (without its newline) and returns true, or
// returns false at the end.
using LineSource = std::function<bool(std::string& line)>;

// Trains a model whose pieces round-trip any text exactly (identity normalisation, byte
// fallback, no dummy prefix, whitespace kept) and returns it serialised. DataError on failure.
std::string train_sentencepiece(const SentencePieceTrainOptions& options, const LineSource& lines);

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `what` names the model in errors (its file, or "the trained model").
  static std::unique_ptr<SentencePieceTokenizer> from_file(const std::string& path);
  static std::unique_ptr<SentencePieceTokenizer> from_serialized(const std::string& model,
                                                                 const std::string& what);
  ~SentencePieceTokenizer() override;

  std::string name() const override { return "sentencepiece"; }
  int64_t vocab_size() const override;
  // Line by line, as spm_encode does, with the model's tokens for "\n" between the lines. For a
  // model trained here that is the same as encoding the text at once (no piece holds a newline,
  // no line gets a dummy prefix), and faster: SentencePiece's BPE slows down on long inputs.
  void encode(std::string_view text, std::vector<uint32_t>& out) const override;
  std::string decode(const std::vector<uint32_t>& tokens) const override;
  // The model, serialised (what tokenizer.model holds).
  std::string serialized() const;
  // Whether the model has a byte piece for every byte, so that no text becomes <unk>.
  bool byte_fallback() const;

 private:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor,
                         std::string what);
  // Encodes one line (no newline in it) and appends its ids.
  void encode_line(std::string_view line, std::vector<int>& ids, std::vector<uint32_t>& out) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string what_;
  std::vector<uint32_t> newline_;  // the model's tokens for "\n"
};

}  // namespace autoloco
