// What a SentencePiece tokenizer.model holds that a Hugging Face export needs, read without the
// SentencePiece library (hf_tokenizer_files.hpp uses it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autoloco {

// What a SentencePiece tokenizer.model holds that the export needs (ModelProto's fields, with
// protobuf's defaults for those the file leaves out).
struct SentencePieceModelInfo {
  struct Piece {
    std::string piece;
    int type = 1;  // 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
  };
  std::vector<Piece> pieces;
  int model_type = 1;  // 1 unigram, 2 bpe, 3 word, 4 char
  bool byte_fallback = false;
  bool split_by_whitespace = true;
  bool treat_whitespace_as_suffix = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // -1: none
  std::string normalizer_name;
  bool precompiled_charsmap = false;  // normalisation rules (nmt_nfkc, ...); identity has none
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;

  // The piece of `id`, or nothing when `id` is negative or past the pieces.
  std::optional<std::string> piece(int64_t id) const;
  // "bpe", "unigram", "word", "char".
  std::string model_type_name() const;
};

// Parses a serialised SentencePiece model. Throws DataError naming `what` when it is not one.
SentencePieceModelInfo parse_sentencepiece_model(const std::string& bytes, const std::string& what);

}  // namespace autoloco
