// prepare.json next to the shards: read, cross-checked and compared with the model.
#include "autoloco/data/prepared_data.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "autoloco/util/crc32.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

void check_model_file(const PreparedData& p) {
  // Only a regular file: a device or a pipe named here would block the read. The error_code
  // form: a name the file system refuses (too long, say) is a missing model, not an exception.
  std::error_code ec;
  const auto bytes = fs::is_regular_file(p.tokenizer_model, ec) ? read_file_bytes(p.tokenizer_model)
                                                                : std::nullopt;
  if (!bytes) {
    throw DataError(
        fmt::format("{} names the tokenizer model '{}', which is missing; copy it "
                    "back beside the shards or prepare the data again",
                    p.json_path, p.tokenizer_model));
  }
  if (p.tokenizer_model_crc32 < 0) return;
  const uint32_t crc = crc32(bytes->data(), bytes->size());
  if (static_cast<int64_t>(crc) != p.tokenizer_model_crc32) {
    throw DataError(fmt::format(
        "tokenizer model '{}' is damaged or was replaced: its CRC-32 is "
        "{:08x}, {} recorded {:08x}; prepare the data again",
        p.tokenizer_model, crc, p.json_path, static_cast<uint32_t>(p.tokenizer_model_crc32)));
  }
}

// A field of prepare.json when present and not null; DataError naming the file otherwise when it
// cannot be read as T.
template <typename T>
std::optional<T> field(const YAML::Node& root, const std::string& key, const std::string& path) {
  const YAML::Node node = root[key];
  if (!node || node.IsNull()) return std::nullopt;
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw DataError(
        fmt::format("{}: \"{}\" has the wrong type; the file is damaged, so prepare "
                    "the data again",
                    path, key));
  }
}

YAML::Node load(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);  // JSON is a subset of YAML's flow style
  } catch (const YAML::Exception& e) {
    throw DataError(
        fmt::format("{} is not valid JSON ({}); it is damaged, so prepare the data "
                    "again",
                    path, e.what()));
  }
  if (!root.IsMap()) {
    throw DataError(fmt::format("{} is not a JSON object; prepare the data again", path));
  }
  return root;
}

PreparedData read_one(const fs::path& json_path) {
  PreparedData p;
  p.json_path = json_path.string();
  const YAML::Node root = load(p.json_path);
  // Files from before the tokenizer option were bytes only, at one byte per token.
  p.tokenizer = field<std::string>(root, "tokenizer", p.json_path).value_or("bytes");
  const auto vocab = field<int64_t>(root, "vocab_size", p.json_path);
  if (!vocab || *vocab < 1) {
    throw DataError(
        fmt::format("{}: no valid \"vocab_size\"; the file is damaged, so prepare "
                    "the data again",
                    p.json_path));
  }
  p.vocab_size = *vocab;
  p.val_bytes_per_token = field<double>(root, "val_bytes_per_token", p.json_path)
                              .value_or(p.tokenizer == "bytes" ? 1.0 : static_cast<double>(NAN));
  if (const auto model = field<std::string>(root, "tokenizer_model", p.json_path)) {
    // autoloco-prepare writes the model beside the shards; another path is not its file.
    if (model->empty() || model->find('/') != std::string::npos || *model == "." ||
        *model == "..") {
      throw DataError(
          fmt::format("{}: \"tokenizer_model\" is '{}', not a file name beside it; "
                      "the file is damaged, so prepare the data again",
                      p.json_path, *model));
    }
    p.tokenizer_model = (json_path.parent_path() / *model).string();
    p.tokenizer_model_crc32 =
        field<int64_t>(root, "tokenizer_model_crc32", p.json_path).value_or(-1);
    check_model_file(p);
  } else if (p.tokenizer != "bytes") {
    throw DataError(
        fmt::format("{}: a {} tokenizer but no \"tokenizer_model\"; prepare the data "
                    "again",
                    p.json_path, p.tokenizer));
  }
  return p;
}

}  // namespace

PreparedData read_prepare_json(const std::string& path) {
  std::error_code ec;
  const fs::path json =
      fs::is_directory(path, ec) ? fs::path(path) / "prepare.json" : fs::path(path);
  if (!fs::is_regular_file(json, ec)) {
    throw DataError(fmt::format(
        "'{}' is not a prepared data directory (no {}); name the directory autoloco-prepare "
        "wrote",
        path, json.string()));
  }
  return read_one(json);
}

bool PreparedData::same_tokenizer(const PreparedData& other) const {
  return tokenizer == other.tokenizer && vocab_size == other.vocab_size &&
         tokenizer_model_crc32 == other.tokenizer_model_crc32;
}

std::string PreparedData::describe() const {
  return fmt::format("{} tokenizer of vocabulary {} ({})", tokenizer, vocab_size, json_path);
}

std::optional<PreparedData> read_prepared_data(const std::vector<std::string>& shard_paths,
                                               const std::string& what) {
  std::set<fs::path> dirs;
  for (const auto& path : shard_paths)
    dirs.insert(fs::path(path).parent_path());
  std::optional<PreparedData> first;
  for (const auto& dir : dirs) {
    const fs::path json = dir / "prepare.json";
    std::error_code ec;
    if (!fs::exists(json, ec)) continue;
    PreparedData p = read_one(json);
    if (!first) {
      first = std::move(p);
    } else if (!first->same_tokenizer(p)) {
      throw DataError(
          fmt::format("{}: its shards come from different tokenizers: {} and {}; "
                      "list shards of one tokenizer only",
                      what, first->describe(), p.describe()));
    }
  }
  return first;
}

void check_same_tokenizer(const std::optional<PreparedData>& train,
                          const std::optional<PreparedData>& val) {
  if (!train || !val || train->same_tokenizer(*val)) return;
  throw DataError(
      fmt::format("data.train and data.val come from different tokenizers: {} and "
                  "{}; prepare both splits together (one autoloco-prepare run)",
                  train->describe(), val->describe()));
}

double bits_per_byte(double loss_nats, double bytes_per_token) {
  if (!(bytes_per_token > 0)) return static_cast<double>(NAN);
  return loss_nats / std::log(2.0) / bytes_per_token;
}

void check_prepared_vocab(const PreparedData& prepared, int64_t vocab_size,
                          const std::string& what) {
  if (prepared.vocab_size == vocab_size) return;
  throw ConfigError(
      fmt::format("model.vocab_size is {} but the shards of {} were made by the {}; "
                  "set model.vocab_size: {} (or --set model.vocab_size={})",
                  vocab_size, what, prepared.describe(), prepared.vocab_size, prepared.vocab_size));
}

}  // namespace autoloco
