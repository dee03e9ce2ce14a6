// A whole file read into memory, for the small files that are read at once (a tokenizer model,
// a text to benchmark); nullopt when it cannot be opened, so the caller names it in its error.
#pragma once

#include <optional>
#include <string>

namespace autoloco {

std::optional<std::string> read_file_bytes(const std::string& path);

}  // namespace autoloco
