// SentencePiece behind the Tokenizer interface (see sentencepiece_tokenizer.hpp). Compiled with
// AUTOLOCO_HAVE_SENTENCEPIECE where CMake found the library; without it, every entry point
// refuses with a DataError that says how to get a build that has it.
#include "autoloco/data/sentencepiece_tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"

#if AUTOLOCO_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace autoloco {

#if AUTOLOCO_HAVE_SENTENCEPIECE
namespace {

// Feeds LineSource into SentencePiece's trainer, which pulls sentences one at a time.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const LineSource& lines) : lines_(lines) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !lines_(line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const LineSource& lines_;
  std::string line_;
  bool done_ = false;
};

std::string read_model(const std::string& path) {
  auto bytes = read_file_bytes(path);
  if (!bytes) {
    throw DataError(
        fmt::format("tokenizer model '{}' cannot be read; check the path (a model "
                    "comes from autoloco-prepare --vocab-size or spm_train)",
                    path));
  }
  return std::move(*bytes);
}

}  // namespace

bool sentencepiece_available() {
  return true;
}

std::string train_sentencepiece(const SentencePieceTrainOptions& options, const LineSource& lines) {
  if (options.model_type != "bpe" && options.model_type != "unigram") {
    throw DataError(
        fmt::format("SentencePiece model type '{}' is not bpe or unigram", options.model_type));
  }
  // Identity normalisation, no dummy prefix, whitespace kept and byte fallback: the tokens
  // decode to exactly the bytes they came from, newlines and indentation included, which bits
  // per byte and the document separator rely on.
  const std::unordered_map<std::string, std::string> args{
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options.model_type},
      {"num_threads", std::to_string(options.threads)},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"minloglevel", "1"},
  };
  sentencepiece::SetRandomGeneratorSeed(options.seed);
  LineIterator iterator(lines);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &iterator, &model);
  if (!status.ok()) {
    throw DataError(
        fmt::format("training the SentencePiece model failed: {}; a vocabulary "
                    "larger than the text supports needs a smaller --vocab-size",
                    status.ToString()));
  }
  return model;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::string& path) {
  return from_serialized(read_model(path), fmt::format("tokenizer model '{}'", path));
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(
    const std::string& model, const std::string& what) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(model);
  if (!status.ok() || processor->GetPieceSize() <= 0) {
    throw DataError(
        fmt::format("{} is not a SentencePiece model ({}); it may be truncated or "
                    "another file: prepare the data again or give the right --sp-model",
                    what, status.ok() ? "no pieces" : status.ToString()));
  }
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(std::move(processor), what));
}

SentencePieceTokenizer::SentencePieceTokenizer(
    std::unique_ptr<sentencepiece::SentencePieceProcessor> processor, std::string what)
    : processor_(std::move(processor)), what_(std::move(what)) {
  std::vector<int> ids;
  encode_line("\n", ids, newline_);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int64_t SentencePieceTokenizer::vocab_size() const {
  return processor_->GetPieceSize();
}

void SentencePieceTokenizer::encode_line(std::string_view line, std::vector<int>& ids,
                                         std::vector<uint32_t>& out) const {
  const auto status = processor_->Encode(line, &ids);
  if (!status.ok()) {
    throw DataError(fmt::format("{} failed to encode text: {}", what_, status.ToString()));
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

void SentencePieceTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  out.reserve(out.size() + text.size() / 3);
  std::vector<int> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    if (end > begin) encode_line(text.substr(begin, end - begin), ids, out);
    if (end == text.size()) break;
    out.insert(out.end(), newline_.begin(), newline_.end());
    begin = end + 1;
  }
}

std::string SentencePieceTokenizer::decode(const std::vector<uint32_t>& tokens) const {
  std::vector<int> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= static_cast<uint32_t>(processor_->GetPieceSize())) {
      throw DataError(fmt::format("token {} at position {} is outside the vocabulary of {} ({})",
                                  tokens[i], i, what_, processor_->GetPieceSize()));
    }
    ids.push_back(static_cast<int>(tokens[i]));
  }
  std::string text;
  const auto status = processor_->Decode(ids, &text);
  if (!status.ok()) {
    throw DataError(fmt::format("{} failed to decode: {}", what_, status.ToString()));
  }
  return text;
}

std::string SentencePieceTokenizer::serialized() const {
  return processor_->serialized_model_proto();
}

bool SentencePieceTokenizer::byte_fallback() const {
  for (int byte = 0; byte < 256; ++byte) {
    const int id = processor_->PieceToId(fmt::format("<0x{:02X}>", byte));
    if (!processor_->IsByte(id)) return false;
  }
  return true;
}

#else  // !AUTOLOCO_HAVE_SENTENCEPIECE
}  // namespace autoloco

// Complete, so that the unique_ptr in SentencePieceTokenizer can be destroyed.
namespace sentencepiece {
class SentencePieceProcessor {};
}  // namespace sentencepiece

namespace autoloco {
namespace {
[[noreturn]] void unavailable() {
  throw DataError(
      "this build has no SentencePiece (libsentencepiece-dev was not found when it was "
      "configured); install it (scripts/setup.sh) and rebuild, or prepare the data on a "
      "machine that has it");
}
}  // namespace

bool sentencepiece_available() {
  return false;
}
std::string train_sentencepiece(const SentencePieceTrainOptions&, const LineSource&) {
  unavailable();
}
std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::string&) {
  unavailable();
}
std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(
    const std::string&, const std::string&) {
  unavailable();
}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;
int64_t SentencePieceTokenizer::vocab_size() const {
  unavailable();
}
void SentencePieceTokenizer::encode(std::string_view, std::vector<uint32_t>&) const {
  unavailable();
}
std::string SentencePieceTokenizer::decode(const std::vector<uint32_t>&) const {
  unavailable();
}
std::string SentencePieceTokenizer::serialized() const {
  unavailable();
}
bool SentencePieceTokenizer::byte_fallback() const {
  unavailable();
}

#endif

}  // namespace autoloco
