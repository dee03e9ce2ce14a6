// A Hugging Face model directory's weights: the shard plan and file names of transformers'
// save_pretrained, model.safetensors.index.json written and checked, and the directory opened
// as one name -> tensor view.
#include "autoloco/model/safetensors_dir.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <limits>
#include <set>

#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/new_file.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

CheckpointError index_error(const std::string& path, const std::string& what) {
  return CheckpointError(
      fmt::format("'{}': {}: the index is damaged; export the model again", path, what));
}

// A file of the index lies in the model's directory: a name that leads elsewhere ("/etc/x",
// "../x", "a/b") would make the reader open a file of another directory.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::optional<uint64_t> plain_integer(const YAML::Node& node) {
  if (!node.IsDefined() || !node.IsScalar() || node.Tag() != "?") return std::nullopt;
  return parse_json_uint(node.Scalar());
}

SafetensorsIndex parse_index_root(const YAML::Node& root, const std::string& path) {
  if (!root.IsMap()) throw index_error(path, "it is not a JSON object");
  SafetensorsIndex index;
  // A key that is absent gives an invalid node, which throws on any question but IsDefined().
  const YAML::Node metadata = root["metadata"];
  if (metadata.IsDefined() && metadata.IsMap()) {
    index.total_size = plain_integer(metadata["total_size"]);
  }
  const YAML::Node weight_map = root["weight_map"];
  if (!weight_map.IsDefined() || !weight_map.IsMap())
    throw index_error(path, "it has no \"weight_map\" object");
  for (const auto& item : weight_map) {
    if (!item.first.IsScalar() || !item.second.IsScalar()) {
      throw index_error(path, "\"weight_map\" holds an entry that is not a name and a file");
    }
    const std::string& name = item.first.Scalar();
    const std::string& file = item.second.Scalar();
    if (!plain_file_name(file)) {
      throw index_error(path, fmt::format("tensor '{}' is mapped to '{}', which is not a plain "
                                          "file name in the model's directory",
                                          name, file));
    }
    if (!index.weight_map.emplace(name, file).second) {
      throw index_error(path, fmt::format("\"weight_map\" names tensor '{}' twice", name));
    }
  }
  return index;
}

// Every name the save would write must be free, and neither layout's entry file may exist: a
// directory holding both model.safetensors and an index would be read as the index alone.
void check_free(const fs::path& dir, const std::vector<std::string>& names) {
  std::set<std::string> all(names.begin(), names.end());
  all.insert(kHfWeightsFile);
  all.insert(kHfWeightsIndexFile);
  for (const std::string& name : all) {
    std::error_code ec;
    if (fs::symlink_status(dir / name, ec).type() != fs::file_type::not_found) {
      throw CheckpointError(fmt::format(
          "'{}' already exists: autoloco never writes over a file; remove it or export to "
          "another directory",
          (dir / name).string()));
    }
  }
}

}  // namespace

std::string hf_shard_name(size_t index, size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& bytes,
                                             uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    // Unlike huggingface_hub, which appends an oversized tensor's shard before the open one, the
    // open shard is closed first: the files then hold the tensors in the order given.
    const bool alone = bytes[i] > max_shard_bytes;
    if (!current.empty() && (alone || bytes[i] > max_shard_bytes - current_bytes)) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    if (alone) {
      shards.push_back({i});
      continue;
    }
    current.push_back(i);
    current_bytes += bytes[i];
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));
  return shards;
}

std::string encode_safetensors_index(const SafetensorsIndex& index) {
  std::string json = "{\n  \"metadata\": {";
  if (index.total_size) json += fmt::format("\n    \"total_size\": {}\n  ", *index.total_size);
  json += "},\n  \"weight_map\": {";
  bool first = true;
  for (const auto& [name, file] : index.weight_map) {
    json += fmt::format("{}\n    {}: {}", first ? "" : ",", json_quote(name), json_quote(file));
    first = false;
  }
  json += index.weight_map.empty() ? "}\n}\n" : "\n  }\n}\n";
  return json;
}

SafetensorsIndex parse_safetensors_index(const std::string& json, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(json);  // JSON is a subset of YAML's flow style
  } catch (const YAML::Exception& e) {
    throw index_error(path, fmt::format("it is not valid JSON ({})", e.what()));
  }
  try {
    return parse_index_root(root, path);
  } catch (const YAML::Exception& e) {
    throw index_error(path, fmt::format("it is not a valid index ({})", e.what()));
  }
}

std::vector<std::string> save_safetensors_dir(const std::string& dir,
                                              const std::vector<SafetensorsBlob>& tensors,
                                              uint64_t max_shard_bytes) {
  const fs::path root(dir);
  std::vector<uint64_t> bytes;
  uint64_t total = 0;
  for (const SafetensorsEntry& e : layout_safetensors(tensors, (root / kHfWeightsFile).string())) {
    bytes.push_back(e.bytes());
    total += e.bytes();
  }
  const std::vector<std::vector<size_t>> plan = plan_shards(bytes, max_shard_bytes);
  std::vector<std::string> names;
  for (size_t s = 0; s < plan.size(); ++s)
    names.push_back(plan.size() == 1 ? kHfWeightsFile : hf_shard_name(s, plan.size()));
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    throw CheckpointError(fmt::format("cannot create the directory '{}': {}", dir, ec.message()));
  }
  check_free(root, names);

  SafetensorsIndex index;
  index.total_size = total;
  for (size_t s = 0; s < plan.size(); ++s) {
    std::vector<SafetensorsBlob> shard;
    for (const size_t i : plan[s]) {
      shard.push_back(tensors[i]);
      index.weight_map[tensors[i].name] = names[s];
    }
    write_safetensors_file((root / names[s]).string(), shard, pt_metadata());
  }
  if (plan.size() == 1) return names;
  try {
    write_new_file((root / kHfWeightsIndexFile).string(), encode_safetensors_index(index));
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
  names.push_back(kHfWeightsIndexFile);
  return names;
}

SafetensorsDir::SafetensorsDir(std::string dir) : dir_(std::move(dir)) {
  const fs::path root(dir_);
  std::error_code ec;
  if (fs::is_regular_file(root / kHfWeightsIndexFile, ec)) {
    open_index((root / kHfWeightsIndexFile).string());
  } else if (fs::exists(root / kHfWeightsFile, ec)) {
    open_single((root / kHfWeightsFile).string());
  } else {
    throw CheckpointError(fmt::format(
        "'{}' holds neither {} nor {}: not a Hugging Face model directory with safetensors "
        "weights",
        dir_, kHfWeightsFile, kHfWeightsIndexFile));
  }
}

void SafetensorsDir::open_single(const std::string& path) {
  files_.push_back(std::make_unique<SafetensorsReader>(path));
  for (const SafetensorsEntry& e : files_.back()->entries()) {
    names_.push_back(e.name);
    where_[e.name] = SafetensorsLocation{files_.back().get(), &e};
  }
}

void SafetensorsDir::open_index(const std::string& index_path) {
  const std::optional<std::string> text = read_file_bytes(index_path);
  if (!text) throw CheckpointError(fmt::format("cannot read '{}'", index_path));
  const SafetensorsIndex index = parse_safetensors_index(*text, index_path);
  std::map<std::string, std::set<std::string>> by_file;  // file -> the tensors it must hold
  for (const auto& [name, file] : index.weight_map)
    by_file[file].insert(name);
  for (const auto& [file, wanted] : by_file) {
    const std::string path = (fs::path(dir_) / file).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      throw CheckpointError(
          fmt::format("'{}' maps {} tensors (among them '{}') to '{}', which is "
                      "missing: the model directory is incomplete",
                      index_path, wanted.size(), *wanted.begin(), path));
    }
    files_.push_back(std::make_unique<SafetensorsReader>(path));
    const SafetensorsReader& reader = *files_.back();
    for (const std::string& name : wanted) {
      if (reader.find(name) == nullptr) {
        throw CheckpointError(
            fmt::format("'{}' maps tensor '{}' to '{}', which has no such "
                        "tensor: the model directory is damaged",
                        index_path, name, path));
      }
    }
    for (const SafetensorsEntry& e : reader.entries()) {
      if (wanted.count(e.name) == 0) continue;
      names_.push_back(e.name);
      where_[e.name] = SafetensorsLocation{&reader, &e};
    }
  }
}

SafetensorsLocation SafetensorsDir::locate(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) {
    throw CheckpointError(fmt::format("the model in '{}' has no tensor '{}' ({} tensors)", dir_,
                                      name, names_.size()));
  }
  return it->second;
}

std::vector<const SafetensorsReader*> SafetensorsDir::files() const {
  std::vector<const SafetensorsReader*> out;
  for (const auto& f : files_)
    out.push_back(f.get());
  return out;
}

}  // namespace autoloco
