// Byte-level tokenizer (see tokenizer.hpp).
#include "autoloco/data/tokenizer.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

std::vector<std::vector<uint32_t>> Tokenizer::encode_batch(
    const std::vector<std::string>& texts) const {
  std::vector<std::vector<uint32_t>> tokens(texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    encode(texts[i], tokens[i]);
  return tokens;
}

void ByteTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  out.reserve(out.size() + text.size());
  for (char c : text)
    out.push_back(static_cast<unsigned char>(c));
}

std::string ByteTokenizer::decode(const std::vector<uint32_t>& tokens) const {
  return decode_bytes(tokens);
}

std::vector<uint32_t> encode_bytes(std::string_view text) {
  std::vector<uint32_t> tokens;
  ByteTokenizer().encode(text, tokens);
  return tokens;
}

std::string decode_bytes(const std::vector<uint32_t>& tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= kByteVocabSize) {
      throw DataError(
          fmt::format("token {} at position {} is not a byte (vocabulary {}); the "
                      "tokens come from another tokenizer",
                      tokens[i], i, kByteVocabSize));
    }
    text.push_back(static_cast<char>(static_cast<unsigned char>(tokens[i])));
  }
  return text;
}

}  // namespace autoloco
