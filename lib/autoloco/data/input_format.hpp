// The formats autoloco-prepare reads, told by a file's name: text, json lines (.jsonl, .json,
// .ndjson, each optionally followed by .gz, .zst or .zstd; the stream's own first bytes then
// say which compression) and parquet (.parquet).
#pragma once

#include <string>

namespace autoloco {

enum class InputFormat { text, json_lines, parquet };

const char* input_format_name(InputFormat format);

InputFormat input_format_of(const std::string& filename);

}  // namespace autoloco
