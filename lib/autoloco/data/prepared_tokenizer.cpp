#include "autoloco/data/prepared_tokenizer.hpp"

#include <fmt/format.h>

#include "autoloco/data/hf_tokenizer.hpp"
#include "autoloco/data/sentencepiece_tokenizer.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

std::unique_ptr<Tokenizer> open_prepared_tokenizer(const PreparedData& prepared,
                                                   const std::string& hf_python, int threads) {
  if (prepared.tokenizer == "bytes") return std::make_unique<ByteTokenizer>();
  if (prepared.tokenizer == "hf")
    return HfTokenizer::start(prepared.tokenizer_model, hf_python, threads);
  if (prepared.tokenizer == "sentencepiece")
    return SentencePieceTokenizer::from_file(prepared.tokenizer_model);
  throw DataError(
      fmt::format("{}: unknown tokenizer '{}' (bytes, sentencepiece or hf); prepare the data again",
                  prepared.json_path, prepared.tokenizer));
}

}  // namespace autoloco
