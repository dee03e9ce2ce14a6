// model.init_from's tokenizer against the data's: a corpus prepared with another tokenizer than
// the one the released weights were trained with gives token ids that mean other words to the
// model, which trains on without any error. Compared by the tokenizer files' bytes (prepare.json
// records the CRC-32 of the tokenizer it used).
#pragma once

#include <optional>
#include <string>

#include "autoloco/data/prepared_data.hpp"

namespace autoloco {

// Throws DataError naming both files and the autoloco-prepare command that fixes it when
// `data` (data.train's prepare.json) was prepared with another tokenizer than the one in the
// Hugging Face directory `model_dir`: hf data against its tokenizer.json, sentencepiece data
// against its tokenizer.model, byte data against a tokenizer.json that is not autoloco's
// byte-level one. Nothing to compare (shards without prepare.json, a directory without the
// matching tokenizer file) passes.
void check_init_from_tokenizer(const std::optional<PreparedData>& data,
                               const std::string& model_dir);

}  // namespace autoloco
