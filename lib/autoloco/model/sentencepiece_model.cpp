// Reading a SentencePiece tokenizer.model as the protobuf it is (ModelProto's few fields that an
// export needs), without the SentencePiece library, which cannot share a process with LibTorch.
#include "autoloco/model/sentencepiece_model.hpp"

#include <fmt/format.h>

#include <string_view>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// ---- tokenizer.model: protobuf's wire format, the few fields of ModelProto read here ----

class Wire {
 public:
  Wire(std::string_view bytes, const std::string& what) : bytes_(bytes), what_(what) {}

  bool done() const { return pos_ >= bytes_.size(); }

  // The next field's number and wire type.
  void tag(uint32_t& field, int& type) {
    const uint64_t key = varint();
    field = static_cast<uint32_t>(key >> 3);
    type = static_cast<int>(key & 7);
    if (field == 0) damaged();
  }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) damaged();
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    damaged();
  }

  // An int32 or bool field (negative int32 values are sign-extended to 64 bits on the wire).
  int64_t int32(int type) {
    if (type != 0) damaged();
    return static_cast<int32_t>(static_cast<uint32_t>(varint()));
  }
  bool boolean(int type) { return int32(type) != 0; }

  std::string_view bytes(int type) {
    if (type != 2) damaged();
    const uint64_t size = varint();
    if (size > bytes_.size() - pos_) damaged();
    const std::string_view out = bytes_.substr(pos_, size);
    pos_ += size;
    return out;
  }

  void skip(int type) {
    switch (type) {
      case 0:
        varint();
        return;
      case 1:
        advance(8);
        return;
      case 2:
        bytes(type);
        return;
      case 5:
        advance(4);
        return;
      default:  // groups (3, 4) are not used by SentencePiece; anything else is not protobuf
        damaged();
    }
  }

  [[noreturn]] void damaged() const {
    throw DataError(fmt::format(
        "{} is not a SentencePiece model (its protobuf ends or breaks at byte {} of {}); it is "
        "damaged or another file: prepare the data again",
        what_, pos_, bytes_.size()));
  }

 private:
  void advance(size_t n) {
    if (n > bytes_.size() - pos_) damaged();
    pos_ += n;
  }

  std::string_view bytes_;
  const std::string& what_;
  size_t pos_ = 0;
};

void parse_piece(Wire w, SentencePieceModelInfo& info) {
  SentencePieceModelInfo::Piece piece;
  while (!w.done()) {
    uint32_t field = 0;
    int type = 0;
    w.tag(field, type);
    if (field == 1) {
      piece.piece = std::string(w.bytes(type));
    } else if (field == 3) {
      piece.type = static_cast<int>(w.int32(type));
    } else {
      w.skip(type);
    }
  }
  info.pieces.push_back(std::move(piece));
}

void parse_trainer_spec(Wire w, SentencePieceModelInfo& info) {
  while (!w.done()) {
    uint32_t field = 0;
    int type = 0;
    w.tag(field, type);
    switch (field) {
      case 3:
        info.model_type = static_cast<int>(w.int32(type));
        break;
      case 22:
        info.split_by_whitespace = w.boolean(type);
        break;
      case 24:
        info.treat_whitespace_as_suffix = w.boolean(type);
        break;
      case 35:
        info.byte_fallback = w.boolean(type);
        break;
      case 40:
        info.unk_id = w.int32(type);
        break;
      case 41:
        info.bos_id = w.int32(type);
        break;
      case 42:
        info.eos_id = w.int32(type);
        break;
      case 43:
        info.pad_id = w.int32(type);
        break;
      default:
        w.skip(type);
    }
  }
}

void parse_normalizer_spec(Wire w, SentencePieceModelInfo& info) {
  while (!w.done()) {
    uint32_t field = 0;
    int type = 0;
    w.tag(field, type);
    switch (field) {
      case 1:
        info.normalizer_name = std::string(w.bytes(type));
        break;
      case 2:
        info.precompiled_charsmap = !w.bytes(type).empty();
        break;
      case 3:
        info.add_dummy_prefix = w.boolean(type);
        break;
      case 4:
        info.remove_extra_whitespaces = w.boolean(type);
        break;
      case 5:
        info.escape_whitespaces = w.boolean(type);
        break;
      default:
        w.skip(type);
    }
  }
}

}  // namespace

std::optional<std::string> SentencePieceModelInfo::piece(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(pieces.size())) return std::nullopt;
  return pieces[static_cast<size_t>(id)].piece;
}

std::string SentencePieceModelInfo::model_type_name() const {
  switch (model_type) {
    case 1:
      return "unigram";
    case 2:
      return "bpe";
    case 3:
      return "word";
    case 4:
      return "char";
    default:
      return fmt::format("type-{}", model_type);
  }
}

SentencePieceModelInfo parse_sentencepiece_model(const std::string& bytes,
                                                 const std::string& what) {
  SentencePieceModelInfo info;
  Wire w(bytes, what);
  while (!w.done()) {
    uint32_t field = 0;
    int type = 0;
    w.tag(field, type);
    if (field == 1) {
      parse_piece(Wire(w.bytes(type), what), info);
    } else if (field == 2) {
      parse_trainer_spec(Wire(w.bytes(type), what), info);
    } else if (field == 3) {
      parse_normalizer_spec(Wire(w.bytes(type), what), info);
    } else {
      w.skip(type);
    }
  }
  if (info.pieces.empty()) {
    throw DataError(fmt::format(
        "{} is not a SentencePiece model (it has no pieces); it is damaged or another file: "
        "prepare the data again",
        what));
  }
  return info;
}

}  // namespace autoloco
