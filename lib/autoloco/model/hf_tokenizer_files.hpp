// The tokenizer's files of a Hugging Face model directory, from the tokenizer autoloco-prepare
// used (prepare.json's "tokenizer" and its model file), so that transformers' AutoTokenizer
// gives the ids the run trained on:
//   sentencepiece: tokenizer.model, copied, and a tokenizer_config.json for LlamaTokenizer (a BPE
//                  model with no normalisation rules, as autoloco-prepare trains) or, for other
//                  models (unigram, normalisation rules), PreTrainedTokenizerFast, which
//                  transformers builds from the model's own settings; no BOS or EOS added, and
//                  "<s>" in a text is text, as SentencePiece reads it (split_special_tokens);
//                  its BOS and EOS declared, or for a model without either the newline's byte
//                  piece "<0x0A>" as both (the document separator);
//   hf:            tokenizer.json, copied, and a tokenizer_config.json for PreTrainedTokenizerFast
//                  that adds no special tokens, as autoloco-prepare encodes;
//   bytes:         a byte-level tokenizer.json (id = byte, through BPE byte fallback; no merges)
//                  and its tokenizer_config.json, whose BOS and EOS are "<0x0A>" (id 10), the
//                  newline that separated the documents; "<0x0A>" in a text stays text.
// lm-evaluation-harness needs a BOS or an EOS (its prefix token): every kind but a tokenizer.json
// that declares neither has one (a note says what to pass then).
// transformers reads a tokenizer.model with the sentencepiece and protobuf packages
// (scripts/hf-requirements.txt). No torch, no SentencePiece library: tokenizer.model is read
// here as the protobuf it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autoloco/model/hf_config.hpp"
#include "autoloco/model/sentencepiece_model.hpp"

namespace autoloco {

// A file of an export, held in memory: its name in the directory and its bytes.
struct HfFile {
  std::string name;
  std::string contents;
};

struct HfTokenizerFiles {
  std::vector<HfFile> files;       // in the order they are written
  std::string tokenizer_class;     // what tokenizer_config.json names
  HfSpecialTokens tokens;          // BOS and EOS ids where the tokenizer defines them
  std::vector<std::string> notes;  // where transformers may not give autoloco-prepare's ids
};

// The files for the tokenizer `kind` ("bytes", "sentencepiece" or "hf", as prepare.json names
// it) whose model file is `model_file` (tokenizer.model, tokenizer.json; unused for bytes).
// `model_max_length` goes into tokenizer_config.json (the run's seq_len). Throws DataError naming
// the file when it cannot be read or is not what `kind` says, Error for an unknown kind.
HfTokenizerFiles hf_tokenizer_files(const std::string& kind, const std::string& model_file,
                                    int64_t model_max_length);

// The byte tokenizer as a tokenizer.json: pieces "<0x00>".."<0xFF>" with ids 0..255, a BPE
// without merges whose byte fallback maps every byte of the UTF-8 text to its own id.
std::string byte_level_tokenizer_json();

}  // namespace autoloco
