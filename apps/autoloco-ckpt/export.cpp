// autoloco-ckpt export: hands a checkpoint's model (the anchor, or a dc's replica) to other
// tools, as a standalone HDF5 file (--format h5, the default: one float32 dataset per parameter
// with its real shape, plus `step` and `config`) or as a Hugging Face model directory
// (--format hf: config.json, generation_config.json and safetensors, model/hf_weights.hpp) that
// transformers' from_pretrained, lm-evaluation-harness and inference servers load.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/model/hf_names.hpp"
#include "autoloco/model/hf_weights.hpp"
#include "autoloco/util/error.hpp"
#include "ckpt_tool.hpp"

namespace autoloco::ckpt_tool {
namespace fs = std::filesystem;
namespace {

int export_h5(const CheckpointModel& m, const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec) || fs::is_symlink(out, ec)) {
    throw CheckpointError(
        fmt::format("'{}' exists: export never writes over a file; remove it or choose another "
                    "name",
                    out));
  }
  for (const Param& p : m.params) {
    if (p.name == "step" || p.name == "config") {
      throw CheckpointError(
          fmt::format("{}: a parameter is named '{}', which export keeps for its own dataset",
                      m.source, p.name));
    }
  }
  // H5Writer refuses an existing file; once it has created OUT, a failure removes it again.
  H5Writer w(out);
  try {
    for (const Param& p : m.params)
      w.write(p.name, m.values.data() + p.offset, p.shape);
    w.write("step", m.step);
    w.write("config", m.config);
    w.close();
  } catch (...) {
    fs::remove(out, ec);
    throw;
  }
  fmt::print("wrote {}: {} parameters ({} float32 values) from {}, step {}\n", out, m.params.size(),
             m.values.size(), m.source, m.step);
  for (const Param& p : m.params)
    fmt::print("  {} [{}]\n", p.name, fmt::join(p.shape, ","));
  fmt::print("  step (int64), config (string)\n");
  return 0;
}

int export_hf_dir(const CheckpointModel& m, const std::string& out, uint64_t max_shard_bytes) {
  const ModelConfig model = m.model_config();
  const NamedTensors ours = named_tensors(m);
  HfExport options;
  options.max_shard_bytes = max_shard_bytes;
  const std::vector<std::string> files = export_hf(out, model, ours, options);
  fmt::print("wrote {}: {} ({} parameters, {} float32 values) from {}, step {}\n", out,
             hf_architecture(model), ours.size(), m.values.size(), m.source, m.step);
  for (const std::string& f : files)
    fmt::print("  {}\n", f);
  fmt::print("load it with transformers.AutoModelForCausalLM.from_pretrained(\"{}\")\n", out);
  return 0;
}

}  // namespace

NamedTensors named_tensors(const CheckpointModel& m) {
  NamedTensors out;
  for (const Param& p : m.params) {
    // A view of the values: export copies what it writes, nothing is written through it.
    auto* data = const_cast<float*>(m.values.data() + p.offset);
    out.emplace_back(p.name, torch::from_blob(data, p.shape, torch::kFloat32));
  }
  return out;
}

int run_export(const std::vector<std::string>& argv) {
  const Args args = Args::parse(argv, {"--replica", "--format", "--max-shard-bytes"}, {});
  if (args.positional.size() != 2) {
    throw UsageError("export takes a checkpoint and OUT (OUT.h5, or a directory with --format hf)");
  }
  const std::string format = args.value("--format").value_or("h5");
  if (format != "h5" && format != "hf") {
    throw UsageError(fmt::format("--format {}: use h5 or hf", format));
  }
  if (format == "h5" && args.has("--max-shard-bytes")) {
    throw UsageError("--max-shard-bytes applies to --format hf only");
  }
  const CheckpointModel m =
      read_checkpoint_model(args.positional[0], parse_replica(args), "export");
  if (format == "h5") return export_h5(m, args.positional[1]);
  const uint64_t shard = args.has("--max-shard-bytes")
                             ? static_cast<uint64_t>(parse_count("--max-shard-bytes",
                                                                 *args.value("--max-shard-bytes")))
                             : kHfMaxShardBytes;
  if (shard == 0) throw UsageError("--max-shard-bytes must be positive");
  return export_hf_dir(m, args.positional[1], shard);
}

}  // namespace autoloco::ckpt_tool
