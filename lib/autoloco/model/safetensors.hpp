// safetensors for LibTorch tensors: write named tensors to one file or to a Hugging Face model
// directory (sharded as transformers shards), and read tensors back from either, converted to
// the dtype asked for. The format itself, without LibTorch, is in safetensors_format.hpp,
// safetensors_reader.hpp, safetensors_writer.hpp and safetensors_dir.hpp.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/model/safetensors_dir.hpp"
#include "autoloco/model/safetensors_format.hpp"
#include "autoloco/model/safetensors_reader.hpp"
#include "autoloco/model/safetensors_writer.hpp"

namespace autoloco {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The format's type of a LibTorch dtype and back; nullopt where the other side has none.
std::optional<SafetensorsDtype> safetensors_dtype(torch::ScalarType dtype);
std::optional<torch::ScalarType> torch_dtype(SafetensorsDtype dtype);

// The tensors as blobs for safetensors_writer.hpp: contiguous CPU tensors are written from their
// memory, others (a GPU, a view) are copied one at a time while being written. The tensors
// must outlive the blobs. Throws CheckpointError naming `path` and the tensor for a dtype that
// safetensors cannot hold.
std::vector<SafetensorsBlob> safetensors_blobs(const NamedTensors& tensors,
                                               const std::string& path);

// Writes `tensors`, in order and in their own dtypes, to the new file `path` (see
// write_safetensors_file: never over an existing file).
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = pt_metadata());

// Writes `tensors` into the model directory `dir` as transformers' save_pretrained does (see
// save_safetensors_dir). Returns the file names written.
std::vector<std::string> save_safetensors(const std::string& dir, const NamedTensors& tensors,
                                          uint64_t max_shard_bytes = kHfMaxShardBytes);

// One tensor as a new CPU tensor of its stored shape, converted to `dtype` (nullopt: the stored
// dtype). Throws CheckpointError naming the file and the tensor when it is absent, cannot be
// read, or has a dtype LibTorch lacks.
torch::Tensor read_tensor(const SafetensorsReader& file, const std::string& name,
                          std::optional<torch::ScalarType> dtype = torch::kFloat32);
torch::Tensor read_tensor(const SafetensorsDir& dir, const std::string& name,
                          std::optional<torch::ScalarType> dtype = torch::kFloat32);

}  // namespace autoloco
