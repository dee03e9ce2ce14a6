// The tokenizer a prepared data directory was made with, opened again from its prepare.json:
// what encodes text as the run's shards were encoded (downstream task files, eval.tasks).
#pragma once

#include <memory>
#include <string>

#include "autoloco/data/prepared_data.hpp"
#include "autoloco/data/tokenizer.hpp"

namespace autoloco {

// bytes: the byte tokenizer; sentencepiece: the model file beside prepare.json; hf: its
// tokenizer.json through the helper under `hf_python` (default_hf_python() when empty) with
// `threads` encoding threads (0: every core). Throws DataError naming prepare.json when the
// tokenizer cannot be opened in this build (SentencePiece outside autoloco-prepare).
std::unique_ptr<Tokenizer> open_prepared_tokenizer(const PreparedData& prepared,
                                                   const std::string& hf_python, int threads);

}  // namespace autoloco
