#include "autoloco/train/init_tokenizer.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "autoloco/model/hf_tokenizer_files.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> regular_file_bytes(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  return read_file_bytes(path);
}

DataError mismatch(const PreparedData& data, const std::string& model_file,
                   const std::string& fix) {
  return DataError(fmt::format(
      "data.train was prepared with another tokenizer than model.init_from's: {} against "
      "'{}'. The model would read its token ids as other words; prepare the corpus with the "
      "model's tokenizer ({}) and point data.train and data.val at it",
      data.describe(), model_file, fix));
}

}  // namespace

void check_init_from_tokenizer(const std::optional<PreparedData>& data,
                               const std::string& model_dir) {
  if (!data || model_dir.empty()) return;
  const std::string json_path = (fs::path(model_dir) / "tokenizer.json").string();
  const std::string json_fix = "autoloco-prepare --tokenizer hf --hf-tokenizer " + json_path;
  if (data->tokenizer == "bytes") {
    // autoloco's export of a byte model writes its byte-level tokenizer.json, which is bytes.
    const auto bytes = regular_file_bytes(json_path);
    if (bytes && *bytes != byte_level_tokenizer_json()) throw mismatch(*data, json_path, json_fix);
    return;
  }
  // hf and sentencepiece data: prepare.json's CRC-32 of the file it was prepared with.
  const bool sp = data->tokenizer == "sentencepiece";
  const std::string path = sp ? (fs::path(model_dir) / "tokenizer.model").string() : json_path;
  const auto bytes = regular_file_bytes(path);
  if (!bytes || data->tokenizer_model_crc32 < 0) return;
  if (static_cast<int64_t>(crc32(bytes->data(), bytes->size())) != data->tokenizer_model_crc32) {
    throw mismatch(*data, path,
                   sp ? "autoloco-prepare --tokenizer sentencepiece --sp-model " + path : json_fix);
  }
}

}  // namespace autoloco
