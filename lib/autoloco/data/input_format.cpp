// File names to formats.
#include "autoloco/data/input_format.hpp"

#include <vector>

#include "autoloco/data/documents.hpp"

namespace autoloco {
namespace {

const std::vector<std::string> kJsonLinesSuffixes = {".jsonl", ".json", ".ndjson"};
const std::vector<std::string> kCompressionSuffixes = {".gz", ".zst", ".zstd"};

std::string without_compression_suffix(const std::string& name) {
  for (const auto& suffix : kCompressionSuffixes) {
    if (has_suffix(name, {suffix})) return name.substr(0, name.size() - suffix.size());
  }
  return name;
}

}  // namespace

const char* input_format_name(InputFormat format) {
  switch (format) {
    case InputFormat::json_lines:
      return "json lines";
    case InputFormat::parquet:
      return "parquet";
    case InputFormat::text:
      break;
  }
  return "text";
}

InputFormat input_format_of(const std::string& filename) {
  if (has_suffix(filename, {".parquet"})) return InputFormat::parquet;
  if (has_suffix(without_compression_suffix(filename), kJsonLinesSuffixes)) {
    return InputFormat::json_lines;
  }
  return InputFormat::text;
}

}  // namespace autoloco
