// autoloco-ckpt logits: the logits of a fixed batch under a model, from a checkpoint or from a
// Hugging Face directory, computed by autoloco's own forward in float32 on the CPU. It is how
// an export is checked against transformers (tests/hf/check_hf.py): the same tokens through
// both, the outputs compared.
#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autoloco/model/decoder.hpp"
#include "autoloco/model/hf_weights.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/new_file.hpp"
#include "ckpt_tool.hpp"

namespace autoloco::ckpt_tool {
namespace {

// One sequence per line, ids separated by spaces or commas, every line as long.
torch::Tensor read_tokens(const std::string& path, int64_t vocab) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--tokens {}: cannot be read", path));
  std::vector<std::vector<int64_t>> rows;
  std::string line;
  while (std::getline(in, line)) {
    for (char& c : line)
      c = c == ',' ? ' ' : c;
    std::istringstream fields(line);
    std::vector<int64_t> row;
    std::string field;
    while (fields >> field) {
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(field, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != field.size() || id < 0 || id >= vocab) {
        throw UsageError(fmt::format("--tokens {}, line {}: '{}' is not a token id in [0, {})",
                                     path, rows.size() + 1, field, vocab));
      }
      row.push_back(id);
    }
    if (row.empty()) continue;
    if (!rows.empty() && row.size() != rows[0].size()) {
      throw UsageError(fmt::format("--tokens {}: line {} has {} ids, the first line {}", path,
                                   rows.size() + 1, row.size(), rows[0].size()));
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw UsageError(fmt::format("--tokens {}: no token ids", path));
  auto out = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())},
                          torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j)
      out[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = rows[i][j];
  }
  return out;
}

struct Source {
  ModelConfig model;
  NamedTensors weights;
  CheckpointModel checkpoint;  // keeps a checkpoint's values alive under `weights`
  std::string describe;
};

Source open_source(const std::string& path, int64_t replica) {
  Source s;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path + "/config.json", ec)) {
    s.model = read_hf_config(path);
    s.weights = import_hf(path, s.model);
    s.describe = fmt::format("{} (Hugging Face {})", path, s.model.arch);
  } else {
    s.checkpoint = read_checkpoint_model(path, replica, "logits");
    s.model = s.checkpoint.model_config();
    s.weights = named_tensors(s.checkpoint);
    s.describe = s.checkpoint.source;
  }
  return s;
}

}  // namespace

int run_logits(const std::vector<std::string>& argv) {
  const Args args = Args::parse(argv, {"--replica", "--tokens", "--out"}, {});
  if (args.positional.size() != 1 || !args.has("--tokens") || !args.has("--out")) {
    throw UsageError(
        "logits takes a checkpoint or a Hugging Face directory, --tokens FILE and "
        "--out FILE");
  }
  const Source s = open_source(args.positional[0], parse_replica(args));
  const torch::Tensor tokens = read_tokens(*args.value("--tokens"), s.model.vocab_size);
  torch::manual_seed(0);  // the weights are all loaded; the seed only makes the build repeatable
  Decoder model = make_decoder(s.model);
  load_parameters(*model, s.weights);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(tokens).contiguous();
  NewFile out(*args.value("--out"));
  out.write(logits.data_ptr<float>(), static_cast<size_t>(logits.numel()) * sizeof(float));
  out.commit();
  fmt::print("wrote {}: float32 logits [{}, {}, {}] (little-endian, row-major) of {}\n",
             *args.value("--out"), logits.size(0), logits.size(1), logits.size(2), s.describe);
  return 0;
}

}  // namespace autoloco::ckpt_tool
