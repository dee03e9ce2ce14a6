// Our parameters to and from a Hugging Face model directory: export writes config.json,
// generation_config.json and the weights (model.safetensors, or shards with their index) under
// transformers' names and layouts; import reads a directory of either architecture, checks it
// against the run's model keys, and gives back our parameters bitwise as exported.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/model/hf_config.hpp"
#include "autoloco/model/hf_tokenizer_files.hpp"
#include "autoloco/model/safetensors.hpp"

namespace autoloco {

struct HfExport {
  HfSpecialTokens tokens;
  uint64_t max_shard_bytes = kHfMaxShardBytes;
  // Written after the weights and before generation_config.json (the tokenizer's files,
  // hf_tokenizer_files), under the same rule: none may exist.
  std::vector<HfFile> extra_files;
};

// The files export writes, in the order written, without HfExport::extra_files.
std::vector<std::string> hf_export_files(const ModelConfig& model, const NamedTensors& ours,
                                         uint64_t max_shard_bytes);

// Writes the model into `dir` (created when missing): the weights, options.extra_files,
// generation_config.json and config.json last. `ours` holds every parameter under our names
// (hf_params), any dtype and device. Nothing is written over: an existing file of those export
// writes is a CheckpointError naming it, raised before any file is written. Returns the names
// of the files written.
std::vector<std::string> export_hf(const std::string& dir, const ModelConfig& model,
                                   const NamedTensors& ours, const HfExport& options = {});

// The parameters of the directory `dir` under our names and layouts, float32 on the CPU, after
// checking its config.json against `run` (check_hf_config). Throws ConfigError for a model
// that differs, CheckpointError naming the file and tensor for weights missing or of the wrong
// shape.
NamedTensors import_hf(const std::string& dir, const ModelConfig& run);

// Copies `tensors` into the module's parameters of the same names (every parameter must be
// there, with its shape). Throws Error naming the first one that is not.
void load_parameters(torch::nn::Module& model, const NamedTensors& tensors);

}  // namespace autoloco
