// autoloco-ckpt export: hands a checkpoint's model (the anchor, or a dc's replica) to other
// tools, as a standalone HDF5 file (--format h5, the default: one float32 dataset per parameter
// with its real shape, plus `step` and `config`) or as a Hugging Face model directory
// (--format hf: config.json, generation_config.json, safetensors, model/hf_weights.hpp, and the
// tokenizer of the run's prepared data, model/hf_tokenizer_files.hpp) that transformers'
// from_pretrained, lm-evaluation-harness and inference servers load.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/mixture.hpp"
#include "autoloco/data/prepared_data.hpp"
#include "autoloco/model/hf_names.hpp"
#include "autoloco/model/hf_tokenizer_files.hpp"
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

// Where the tokenizer comes from: --tokenizer DIR, or the run's data.train (or first source).
struct TokenizerChoice {
  std::optional<std::string> dir;  // --tokenizer DIR
  bool skip = false;               // --no-tokenizer
};

// The prepared data of the run's tokenizer, or nothing (with a line saying why) when it cannot be
// found from here. An explicit --tokenizer DIR that is not usable is an error.
std::optional<PreparedData> find_tokenizer(const CheckpointModel& m, const ModelConfig& model,
                                           const TokenizerChoice& choice) {
  if (choice.skip) {
    fmt::print("tokenizer: not exported (--no-tokenizer)\n");
    return std::nullopt;
  }
  if (choice.dir) {
    const std::string& dir = *choice.dir;
    if (!fs::is_directory(dir)) {
      throw DataError(fmt::format(
          "--tokenizer {}: not a directory; name the directory autoloco-prepare wrote (its "
          "prepare.json, shards and tokenizer file)",
          dir));
    }
    auto p = read_prepared_data({(fs::path(dir) / "prepare.json").string()}, "--tokenizer");
    if (!p) {
      throw DataError(fmt::format(
          "--tokenizer {}: no prepare.json in it; name the directory autoloco-prepare wrote", dir));
    }
    if (p->vocab_size != model.vocab_size) {
      throw DataError(
          fmt::format("--tokenizer {}: the {} is not this model's, whose model.vocab_size is {}",
                      dir, p->describe(), model.vocab_size));
    }
    return p;
  }
  const std::string hint =
      "; give the prepared data directory with --tokenizer DIR, or --no-tokenizer";
  std::vector<std::string> train;
  try {
    const Config run = parse_config(m.config, {}, m.source + " (the run's config)");
    // A mixture's sources share one tokenizer (the trainer checks): the first one's tells it.
    const std::vector<std::string> patterns =
        run.data.sources.empty()
            ? run.data.train
            : source_patterns(run.data.sources[0], "the run's data.sources[0]").train;
    train = expand_shard_patterns(patterns, "the run's data.train");
  } catch (const Error& e) {
    fmt::print(
        "tokenizer: not exported: the run's training shards are not found from here ({}; "
        "relative paths are taken from the current directory){}\n",
        e.what(), hint);
    return std::nullopt;
  }
  std::optional<PreparedData> p;
  try {
    p = read_prepared_data(train, "the run's data.train");
  } catch (const Error& e) {
    fmt::print("tokenizer: not exported: {}{}\n", e.what(), hint);
    return std::nullopt;
  }
  if (!p) {
    fmt::print(
        "tokenizer: not exported: the run's shards ({}, ...) have no prepare.json beside them "
        "(not made by autoloco-prepare){}\n",
        train.front(), hint);
    return std::nullopt;
  }
  if (p->vocab_size != model.vocab_size) {
    fmt::print(
        "tokenizer: not exported: the {} is not this model's (model.vocab_size {}): the data was "
        "prepared again since{}\n",
        p->describe(), model.vocab_size, hint);
    return std::nullopt;
  }
  return p;
}

int export_hf_dir(const CheckpointModel& m, const std::string& out, uint64_t max_shard_bytes,
                  const TokenizerChoice& choice) {
  const ModelConfig model = m.model_config();
  const NamedTensors ours = named_tensors(m);
  HfExport options;
  options.max_shard_bytes = max_shard_bytes;
  std::optional<HfTokenizerFiles> tokenizer;
  const std::optional<PreparedData> prepared = find_tokenizer(m, model, choice);
  if (prepared) {
    try {
      tokenizer = hf_tokenizer_files(prepared->tokenizer, prepared->tokenizer_model, model.seq_len);
    } catch (const Error& e) {
      if (choice.dir) throw;  // named on the command line: it has to work
      fmt::print(
          "tokenizer: not exported: {}; name another prepared data directory with "
          "--tokenizer DIR, or --no-tokenizer\n",
          e.what());
    }
  }
  if (tokenizer) {
    options.tokens = tokenizer->tokens;
    options.extra_files = tokenizer->files;
  }
  const std::vector<std::string> files = export_hf(out, model, ours, options);
  fmt::print("wrote {}: {} ({} parameters, {} float32 values) from {}, step {}\n", out,
             hf_architecture(model), ours.size(), m.values.size(), m.source, m.step);
  for (const std::string& f : files)
    fmt::print("  {}\n", f);
  fmt::print("load it with transformers.AutoModelForCausalLM.from_pretrained(\"{}\")\n", out);
  if (tokenizer) {
    const auto id = [](const std::optional<int64_t>& v) {
      return v ? std::to_string(*v) : std::string("none");
    };
    fmt::print(
        "tokenizer: the {} as {} (bos {}, eos {}); "
        "transformers.AutoTokenizer.from_pretrained(\"{}\") loads it\n",
        prepared->describe(), tokenizer->tokenizer_class, id(tokenizer->tokens.bos),
        id(tokenizer->tokens.eos), out);
    for (const std::string& note : tokenizer->notes)
      fmt::print("  note: {}\n", note);
  }
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
  const Args args = Args::parse(argv, {"--replica", "--format", "--max-shard-bytes", "--tokenizer"},
                                {"--no-tokenizer"});
  if (args.positional.size() != 2) {
    throw UsageError("export takes a checkpoint and OUT (OUT.h5, or a directory with --format hf)");
  }
  const std::string format = args.value("--format").value_or("h5");
  if (format != "h5" && format != "hf") {
    throw UsageError(fmt::format("--format {}: use h5 or hf", format));
  }
  for (const char* flag : {"--max-shard-bytes", "--tokenizer", "--no-tokenizer"}) {
    if (format == "h5" && args.has(flag)) {
      throw UsageError(fmt::format("{} applies to --format hf only", flag));
    }
  }
  TokenizerChoice tokenizer;
  tokenizer.dir = args.value("--tokenizer");
  tokenizer.skip = args.has("--no-tokenizer");
  if (tokenizer.dir && tokenizer.skip) {
    throw UsageError("--tokenizer DIR and --no-tokenizer exclude each other");
  }
  if (tokenizer.dir && tokenizer.dir->empty()) throw UsageError("--tokenizer needs a directory");
  const CheckpointModel m =
      read_checkpoint_model(args.positional[0], parse_replica(args), "export");
  if (format == "h5") return export_h5(m, args.positional[1]);
  const uint64_t shard = args.has("--max-shard-bytes")
                             ? static_cast<uint64_t>(parse_count("--max-shard-bytes",
                                                                 *args.value("--max-shard-bytes")))
                             : kHfMaxShardBytes;
  if (shard == 0) throw UsageError("--max-shard-bytes must be positive");
  return export_hf_dir(m, args.positional[1], shard, tokenizer);
}

}  // namespace autoloco::ckpt_tool
