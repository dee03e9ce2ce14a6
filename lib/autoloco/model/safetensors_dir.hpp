// The weights of a Hugging Face model directory, without LibTorch: one model.safetensors, or
// shards model-00001-of-0000N.safetensors listed by model.safetensors.index.json, written as
// transformers' save_pretrained writes them and read as from_pretrained reads them.
// safetensors.hpp has the LibTorch side (tensors in, tensors out).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoloco/model/safetensors_reader.hpp"
#include "autoloco/model/safetensors_writer.hpp"

namespace autoloco {

constexpr const char* kHfWeightsFile = "model.safetensors";
constexpr const char* kHfWeightsIndexFile = "model.safetensors.index.json";
// transformers' default max_shard_size "5GB" (decimal gigabytes).
constexpr uint64_t kHfMaxShardBytes = 5'000'000'000;

// The file name of shard `index` (from 0) of `count`: "model-00001-of-00003.safetensors".
std::string hf_shard_name(size_t index, size_t count);

// Splits tensors of `bytes` bytes, in order, into shards of at most `max_shard_bytes`: a shard
// is closed when the next tensor would tip it over; a tensor larger than the limit gets a shard
// of its own. Returns the positions of each shard's tensors. No tensors: one empty shard.
std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& bytes,
                                             uint64_t max_shard_bytes);

// model.safetensors.index.json: "metadata" {"total_size": bytes of all tensors} and
// "weight_map" {tensor name: file name}.
struct SafetensorsIndex {
  std::optional<uint64_t> total_size;
  std::map<std::string, std::string> weight_map;
};

// The JSON as transformers writes it (indent 2, keys sorted, a final newline).
std::string encode_safetensors_index(const SafetensorsIndex& index);
// Parses an index and checks that every file it names is a plain file name (no directory, no
// "..", so it cannot lead out of the model's directory). Throws CheckpointError naming `path`.
SafetensorsIndex parse_safetensors_index(const std::string& json, const std::string& path);

// Writes `tensors` into the directory `dir` (created if missing) as transformers does: all in
// model.safetensors when their bytes fit `max_shard_bytes`, else in shards plus the index,
// which is written last, so that a directory with an index has all its shards. Every file has
// the metadata {"format": "pt"}. Nothing is written over: an existing model.safetensors, index
// or shard name is a CheckpointError naming it, raised before any file is written. Returns the
// names of the files written, in the order written.
std::vector<std::string> save_safetensors_dir(const std::string& dir,
                                              const std::vector<SafetensorsBlob>& tensors,
                                              uint64_t max_shard_bytes = kHfMaxShardBytes);

// Where one tensor of a directory lies.
struct SafetensorsLocation {
  const SafetensorsReader* file = nullptr;
  const SafetensorsEntry* entry = nullptr;
};

// The weights of a model directory, every file opened and checked: with an index, each tensor
// it maps must be in the file it names (tensors a shard holds beyond the index are ignored, as
// transformers ignores them); without one, model.safetensors.
class SafetensorsDir {
 public:
  // Throws CheckpointError naming the directory or the file at fault.
  explicit SafetensorsDir(std::string dir);

  const std::string& dir() const { return dir_; }
  // Every tensor: file by file in name order, each file's in the order of its data (for a
  // directory written by save_safetensors_dir, the order the tensors were given in).
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  // Throws CheckpointError naming the directory and the tensor when it has none of that name.
  SafetensorsLocation locate(const std::string& name) const;
  // The files opened, in name order.
  std::vector<const SafetensorsReader*> files() const;

 private:
  void open_index(const std::string& index_path);
  void open_single(const std::string& path);

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::vector<std::string> names_;
  std::map<std::string, SafetensorsLocation> where_;
};

}  // namespace autoloco
