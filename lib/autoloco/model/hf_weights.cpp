#include "autoloco/model/hf_weights.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "autoloco/model/hf_names.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/new_file.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

const torch::Tensor& find_ours(const NamedTensors& ours, const std::string& name) {
  for (const auto& [n, t] : ours) {
    if (n == name) return t;
  }
  throw Error(fmt::format("HF export: the model has no parameter '{}'", name));
}

// Our tensors under transformers' names and layouts, in our order, contiguous on the CPU.
NamedTensors to_hf(const ModelConfig& model, const NamedTensors& ours) {
  NamedTensors out;
  for (const HfParam& p : hf_params(model)) {
    torch::Tensor t = find_ours(ours, p.ours).detach().to(torch::kCPU);
    if (t.sizes().vec() != p.shape) {
      throw Error(
          fmt::format("HF export: parameter '{}' has shape [{}] where the model keys "
                      "give [{}]",
                      p.ours, fmt::join(t.sizes(), ","), fmt::join(p.shape, ",")));
    }
    out.emplace_back(p.hf, (p.transposed ? t.t() : t).contiguous());
  }
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  NewFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

void refuse_existing(const std::string& dir, const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    std::error_code ec;
    const std::string path = dir + "/" + f;
    if (fs::exists(path, ec) || fs::is_symlink(path, ec)) {
      throw CheckpointError(fmt::format(
          "'{}' exists: export never writes over a file; choose a new directory or remove it",
          path));
    }
  }
}

// GPT-2 checkpoints saved from GPT2Model (the hub's gpt2 itself) lack the "transformer." prefix.
std::string stored_name(const SafetensorsDir& weights, const std::string& hf) {
  const std::string prefix = "transformer.";
  if (!weights.contains(hf) && hf.compare(0, prefix.size(), prefix) == 0 &&
      weights.contains(hf.substr(prefix.size()))) {
    return hf.substr(prefix.size());
  }
  return hf;
}

}  // namespace

std::vector<std::string> hf_export_files(const ModelConfig& model, const NamedTensors& ours,
                                         uint64_t max_shard_bytes) {
  std::vector<uint64_t> bytes;
  for (const auto& [name, t] : to_hf(model, ours))
    bytes.push_back(static_cast<uint64_t>(t.numel() * t.element_size()));
  const auto shards = plan_shards(bytes, max_shard_bytes);
  std::vector<std::string> files;
  if (shards.size() == 1) {
    files.emplace_back(kHfWeightsFile);
  } else {
    for (size_t i = 0; i < shards.size(); ++i)
      files.push_back(hf_shard_name(i, shards.size()));
    files.emplace_back(kHfWeightsIndexFile);
  }
  files.emplace_back("generation_config.json");
  files.emplace_back("config.json");
  return files;
}

std::vector<std::string> export_hf(const std::string& dir, const ModelConfig& model,
                                   const NamedTensors& ours, const HfExport& options) {
  const NamedTensors hf = to_hf(model, ours);
  std::vector<std::string> files = hf_export_files(model, ours, options.max_shard_bytes);
  for (const HfFile& f : options.extra_files) {
    if (f.name.empty() || f.name.find('/') != std::string::npos ||
        std::find(files.begin(), files.end(), f.name) != files.end()) {
      throw Error(fmt::format("HF export: '{}' is not a new file name of the directory", f.name));
    }
    files.push_back(f.name);
  }
  refuse_existing(dir, files);
  fs::create_directories(dir);
  std::vector<std::string> written = save_safetensors(dir, hf, options.max_shard_bytes);
  for (const HfFile& f : options.extra_files) {
    write_text(dir + "/" + f.name, f.contents);
    written.push_back(f.name);
  }
  // config.json last: a directory that has it has its weights.
  write_text(dir + "/generation_config.json", hf_generation_config_json(options.tokens));
  written.emplace_back("generation_config.json");
  write_text(dir + "/config.json", hf_config_json(model, options.tokens));
  written.emplace_back("config.json");
  return written;
}

NamedTensors import_hf(const std::string& dir, const ModelConfig& run) {
  check_hf_config(run, read_hf_config(dir), dir);
  const SafetensorsDir weights(dir);
  NamedTensors ours;
  for (const HfParam& p : hf_params(run)) {
    const std::string name = stored_name(weights, p.hf);
    torch::Tensor t = read_tensor(weights, name);
    std::vector<int64_t> expected = p.shape;
    if (p.transposed) std::swap(expected[0], expected[1]);
    if (t.sizes().vec() != expected) {
      throw CheckpointError(fmt::format(
          "model.init_from: {} in '{}' has shape [{}] where its config.json gives [{}]: the "
          "directory is damaged or its config.json is not its own",
          name, dir, fmt::join(t.sizes(), ","), fmt::join(expected, ",")));
    }
    ours.emplace_back(p.ours, p.transposed ? t.t().contiguous() : t);
  }
  return ours;
}

void load_parameters(torch::nn::Module& model, const NamedTensors& tensors) {
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, t] : tensors)
    by_name[name] = &t;
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    const auto it = by_name.find(item.key());
    if (it == by_name.end()) {
      throw Error(fmt::format("loading weights: no tensor for parameter '{}'", item.key()));
    }
    if (it->second->sizes() != item.value().sizes()) {
      throw Error(fmt::format("loading weights: '{}' has shape [{}], the parameter [{}]",
                              item.key(), fmt::join(it->second->sizes(), ","),
                              fmt::join(item.value().sizes(), ",")));
    }
    item.value().copy_(*it->second);
  }
}

}  // namespace autoloco
