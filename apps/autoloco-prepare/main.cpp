// autoloco-prepare: turns a corpus (a directory of Python's reST docs, one novel.txt, or the json
// lines and parquet files that FineWeb, DCLM and C4 ship as) into
// train/val token shards for autoloco-train, as bytes, SentencePiece subwords or the tokens of
// a Hugging Face tokenizer.json, and reports the entropy bound to beat and the bytes per token
// that bits per byte need.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "autoloco/data/prepare.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/timer.hpp"
#include "bench_tokenize.hpp"
#include "task_mode.hpp"

namespace {

constexpr const char* kUsage = R"(usage: autoloco-prepare [options] INPUT...

Reads text files, json lines and parquet files (INPUTs are files or directories, walked
recursively in sorted order), makes documents of them (pieces of text files; a row of the
others), splits the documents into train and val, tokenizes them and writes token shards for
autoloco-train:
  OUT/train_000.bin ...  OUT/val_000.bin ...  OUT/prepare.json
  [OUT/tokenizer.model (sentencepiece) or OUT/tokenizer.json (hf)]
Each document is followed by a newline. prepare.json records the tokenizer, its vocabulary
(model.vocab_size must equal it) and the val split's bytes per token (for eval_bpb).

Formats, by file name: *.jsonl, *.json, *.ndjson are json lines (one object per line, the
document in --text-field), plain or compressed with gzip or zstd (*.jsonl.gz, *.jsonl.zst, ...;
the stream's first bytes say which); *.parquet are parquet files (the --text-field column,
read row group by row group); anything else is text. Memory stays bounded whatever the size.

options:
  --out DIR           output directory (default data/pydoc, where the quickstart config reads)
  --tokenizer NAME    bytes (vocabulary 256, the default), sentencepiece or hf
  --vocab-size N      sentencepiece: train a model of N pieces on the training split only
  --sp-model-type T   sentencepiece: bpe (default) or unigram
  --sp-model FILE     sentencepiece: use this model instead of training one (copied to OUT)
  --hf-tokenizer FILE hf: the Hugging Face tokenizer.json to use (GPT-2's, Llama 3's, Qwen's,
                      ...; copied to OUT). Encoded by the Python tokenizers package, without
                      special tokens; the text must be UTF-8. Shards hold uint32 tokens when
                      the vocabulary (added tokens included) exceeds 65536
  --hf-python PATH    hf: the Python interpreter that has the tokenizers package (default
                      $AUTOLOCO_HF_PYTHON, else the venv of scripts/hf-env.sh:
                      ${AUTOLOCO_TORCH_VENV:-~/.cache/autoloco/torch-2.11.0}/bin/python)
  --val-fraction F    expected share of documents in the validation split, in (0, 1)
                      (default 0.05)
  --doc-bytes N|auto  cut files longer than N bytes into documents at blank lines (default
                      auto: whole files when there are at least 20/F of them, else pieces
                      sized so that val gets about 20 documents)
  --ext LIST          keep only files ending in one of these comma-separated suffixes, e.g.
                      .rst,.txt or .jsonl.zst (default: json lines and parquet files by their
                      names, and every other file with no NUL byte in its first 4 KiB)
  --text-field NAME   json lines and parquet: the field (column) with the text (default text)
  --skip-bad          leave out bad rows (malformed json, a missing field, a value that is not
                      a string) and the rest of a damaged file, and report how many, instead
                      of stopping at the first with an error
  --shard-tokens N    maximum tokens per shard (default 8388608)
  --seed S            seed of the per-document train/val split (default 1337)
  --threads N         threads that tokenize and train (default: every core)
  --overwrite         replace prepared data already in DIR
  -h, --help          print this help

downstream task (what autoloco-train does for each of eval.tasks at its start):
  autoloco-prepare --task FILE --task-format F --tokenizer-from DIR --out IDS
                      tokenizes the task file FILE (json lines; F: hellaswag, arc, piqa, mc or
                      lambada, docs/tasks.md) with the tokenizer of the prepared data directory
                      DIR as lm-evaluation-harness's hf backend would, into the task ids file IDS

benchmark (what autoloco-bench --tokenize runs; JSON on stdout):
  autoloco-prepare --bench --sp-model M [--threads N] [--repeat R] [--spm-encode P] TEXT
                      encoding of TEXT with model M, 1 thread and N threads, against
                      sentencepiece's spm_encode (P, default spm_encode from PATH)

examples:
  autoloco-prepare --out data/pydoc /usr/share/doc/python3.11/html/_sources
  autoloco-prepare --tokenizer sentencepiece --vocab-size 4096 --out data/pydoc-sp4k \
      /usr/share/doc/python3.11/html/_sources
  autoloco-prepare --out data/novel novel.txt
  autoloco-prepare --out data/fineweb-edu fineweb-edu/sample/10BT/   # *.parquet
  autoloco-prepare --out data/dclm --skip-bad dclm/global-shard_01_of_10/  # *.jsonl.zst
  scripts/hf-env.sh    # once: the Python with the tokenizers package
  autoloco-prepare --tokenizer hf --hf-tokenizer gpt2/tokenizer.json --out data/pydoc-gpt2 \
      /usr/share/doc/python3.11/html/_sources
)";

// Bad command lines exit with 2, data problems with 1.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    if (end > begin) items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  if (items.empty()) throw UsageError("--ext needs at least one suffix, e.g. --ext .rst,.txt");
  return items;
}

double parse_double(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw UsageError(fmt::format("{} expects a number, got '{}'", flag, text));
  }
  return value;
}

uint64_t parse_count(const std::string& flag, const std::string& text) {
  size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-') {
    throw UsageError(fmt::format("{} expects a non-negative integer, got '{}'", flag, text));
  }
  return value;
}

// Splits "--flag=value" and takes the value of "--flag value" from the next argument.
class Args {
 public:
  Args(int argc, char** argv) : args_(argv + 1, argv + argc) {}
  bool done() const { return pos_ >= args_.size(); }
  std::string next() {
    std::string arg = args_[pos_++];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      pending_ = arg.substr(eq + 1);
      has_pending_ = true;
      return arg.substr(0, eq);
    }
    return arg;
  }
  std::string value(const std::string& flag) {
    if (has_pending_) {
      has_pending_ = false;
      return pending_;
    }
    if (done()) throw UsageError(fmt::format("{} needs a value", flag));
    return args_[pos_++];
  }
  void expect_no_value(const std::string& flag) const {
    if (has_pending_) throw UsageError(fmt::format("{} takes no value", flag));
  }

 private:
  std::vector<std::string> args_;
  size_t pos_ = 0;
  std::string pending_;
  bool has_pending_ = false;
};

// --bench and its options (bench_tokenize.hpp).
struct BenchRequest {
  bool requested = false;
  autoloco::BenchTokenizeOptions options;
};

// --task and its options (task_mode.hpp).
struct TaskRequest {
  bool requested = false;
  autoloco::TaskModeOptions options;
};

// The options of --task, checked once the command line is read.
void finish_task_request(const autoloco::PrepareOptions& options, TaskRequest& task) {
  if (!options.inputs.empty()) {
    throw UsageError("--task takes no INPUT: the task file is --task's argument");
  }
  if (task.options.format.empty() || task.options.prepared.empty() || options.out_dir.empty()) {
    throw UsageError(
        "--task FILE needs --task-format F, --tokenizer-from DIR (a prepared data directory) and "
        "--out FILE (the task ids file)");
  }
  task.options.out = options.out_dir;
  task.options.hf_python = options.hf_python;
  task.options.threads = options.threads;
}

// Returns false when --help was asked for.
bool parse(int argc, char** argv, autoloco::PrepareOptions& options, BenchRequest& bench,
           TaskRequest& task) {
  Args args(argc, argv);
  bool out_given = false;
  while (!args.done()) {
    const std::string arg = args.next();
    if (arg == "-h" || arg == "--help") return false;
    if (arg == "--out") {
      options.out_dir = args.value(arg);
      out_given = true;
    } else if (arg == "--task") {
      task.requested = true;
      task.options.task_file = args.value(arg);
    } else if (arg == "--task-format") {
      task.options.format = args.value(arg);
    } else if (arg == "--tokenizer-from") {
      task.options.prepared = args.value(arg);
    } else if (arg == "--val-fraction") {
      options.val_fraction = parse_double(arg, args.value(arg));
    } else if (arg == "--ext") {
      options.extensions = split_list(args.value(arg));
    } else if (arg == "--shard-tokens") {
      options.shard_tokens = parse_count(arg, args.value(arg));
    } else if (arg == "--seed") {
      options.seed = parse_count(arg, args.value(arg));
    } else if (arg == "--tokenizer") {
      options.tokenizer = args.value(arg);
    } else if (arg == "--vocab-size") {
      options.vocab_size = static_cast<int64_t>(parse_count(arg, args.value(arg)));
      if (options.vocab_size == 0) throw UsageError("--vocab-size must be positive");
    } else if (arg == "--sp-model-type") {
      options.sp_model_type = args.value(arg);
    } else if (arg == "--sp-model") {
      options.sp_model = args.value(arg);
    } else if (arg == "--hf-tokenizer") {
      options.hf_tokenizer = args.value(arg);
    } else if (arg == "--hf-python") {
      options.hf_python = args.value(arg);
    } else if (arg == "--doc-bytes") {
      const std::string value = args.value(arg);
      options.doc_bytes = value == "auto" ? 0 : parse_count(arg, value);
      if (value != "auto" && options.doc_bytes == 0) {
        throw UsageError("--doc-bytes must be positive or auto");
      }
    } else if (arg == "--threads") {
      options.threads = static_cast<int>(parse_count(arg, args.value(arg)));
      if (options.threads <= 0) throw UsageError("--threads must be positive");
    } else if (arg == "--text-field") {
      options.text_field = args.value(arg);
      if (options.text_field.empty()) throw UsageError("--text-field needs a field name");
    } else if (arg == "--skip-bad") {
      args.expect_no_value(arg);
      options.skip_bad = true;
    } else if (arg == "--overwrite") {
      args.expect_no_value(arg);
      options.overwrite = true;
    } else if (arg == "--bench") {
      args.expect_no_value(arg);
      bench.requested = true;
    } else if (arg == "--repeat") {
      bench.options.repeats = static_cast<int64_t>(parse_count(arg, args.value(arg)));
      if (bench.options.repeats <= 0) throw UsageError("--repeat must be positive");
    } else if (arg == "--spm-encode") {
      bench.options.spm_encode = args.value(arg);
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    } else {
      options.inputs.push_back(arg);
    }
  }
  if (!task.requested && (!task.options.format.empty() || !task.options.prepared.empty())) {
    throw UsageError("--task-format and --tokenizer-from need --task FILE");
  }
  if (task.requested) {
    // --out's default is a data directory; a task needs its own file named.
    if (!out_given) options.out_dir.clear();
    finish_task_request(options, task);
    return true;
  }
  if (options.inputs.empty()) {
    throw UsageError("no INPUT given: name text, json lines or parquet files, or directories");
  }
  if (bench.requested) {
    if (options.sp_model.empty() || options.inputs.size() != 1) {
      throw UsageError("--bench needs --sp-model FILE and one text file");
    }
    bench.options.model = options.sp_model;
    bench.options.text = options.inputs.front();
    bench.options.threads = options.threads;
    return true;
  }
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0)) {
    throw UsageError(fmt::format("--val-fraction must be in (0, 1), got {}", options.val_fraction));
  }
  if (options.shard_tokens == 0) throw UsageError("--shard-tokens must be positive");
  if (options.tokenizer != "bytes" && options.tokenizer != "sentencepiece" &&
      options.tokenizer != "hf") {
    throw UsageError(
        fmt::format("--tokenizer must be bytes, sentencepiece or hf, got '{}'", options.tokenizer));
  }
  const bool sp_flags = options.vocab_size != 0 || !options.sp_model.empty();
  if (options.tokenizer != "sentencepiece" && sp_flags) {
    throw UsageError("--vocab-size and --sp-model need --tokenizer sentencepiece");
  }
  const bool hf_flags = !options.hf_tokenizer.empty() || !options.hf_python.empty();
  if (options.tokenizer != "hf" && hf_flags) {
    throw UsageError("--hf-tokenizer and --hf-python need --tokenizer hf");
  }
  if (options.tokenizer == "hf" && options.hf_tokenizer.empty()) {
    throw UsageError("--tokenizer hf needs --hf-tokenizer FILE (a tokenizer.json)");
  }
  if (options.tokenizer == "sentencepiece" &&
      (options.vocab_size != 0) == !options.sp_model.empty()) {
    throw UsageError(
        "--tokenizer sentencepiece needs --vocab-size N (train a model) or --sp-model FILE "
        "(use one), exactly one of them");
  }
  if (options.sp_model_type != "bpe" && options.sp_model_type != "unigram") {
    throw UsageError(
        fmt::format("--sp-model-type must be bpe or unigram, got '{}'", options.sp_model_type));
  }
  return true;
}

void print_summary(const autoloco::PrepareOptions& options, const autoloco::PrepareReport& r,
                   double seconds) {
  fmt::print("prepared {} files ({} bytes; {} skipped by the filters) into {} in {:.1f} s\n",
             r.files, r.bytes, r.skipped_files, options.out_dir, seconds);
  if (r.row_files > 0) {
    fmt::print("  {} documents: a row each of {} json lines and parquet files{}\n", r.documents,
               r.row_files,
               r.row_files < r.files ? ", and pieces or the whole of each text file" : "");
  } else if (r.whole_files) {
    fmt::print("  {} documents: one per file\n", r.documents);
  } else {
    fmt::print("  {} documents: files cut at blank lines into pieces of at most {} bytes\n",
               r.documents, r.doc_bytes);
  }
  fmt::print("  train: {} documents, {} tokens, {} shards\n", r.train_documents, r.train_tokens,
             r.train_shards.size());
  fmt::print("  val:   {} documents, {} tokens, {} shards\n", r.val_documents, r.val_tokens,
             r.val_shards.size());
  if (r.tokenizer == "bytes") {
    fmt::print("  tokenizer bytes: vocab_size {}\n", r.vocab_size);
  } else if (r.tokenizer == "hf") {
    fmt::print("  tokenizer hf (tokenizers {}): vocab_size {}, {}/{} from {}\n",
               r.hf_library_version, r.vocab_size, options.out_dir, r.tokenizer_model,
               options.hf_tokenizer);
  } else {
    fmt::print("  tokenizer sentencepiece ({}): vocab_size {}, {}/{}{}\n", r.sp_model_type,
               r.vocab_size, options.out_dir, r.tokenizer_model,
               r.train_tokenizer_s > 0 ? fmt::format(", trained in {:.1f} s", r.train_tokenizer_s)
                                       : std::string());
  }
  const double mb = static_cast<double>(r.train_bytes + r.val_bytes) / 1e6;
  fmt::print("  tokenized {:.1f} MB in {:.2f} s ({:.1f} MB/s), {} bits per token in the shards\n",
             mb, r.tokenize_s, r.tokenize_s > 0 ? mb / r.tokenize_s : 0.0, r.token_bits);
  for (const auto& warning : r.warnings)
    fmt::print("  warning: {}\n", warning);
  if (r.skipped_rows > 0 || r.skipped_tails > 0) {
    fmt::print("  skipped (--skip-bad): {} bad rows, {} damaged files' rest; the first:\n",
               r.skipped_rows, r.skipped_tails);
    for (const auto& example : r.skipped_examples)
      fmt::print("    {}\n", example);
  }
  if (r.val_documents == 0) {
    fmt::print("  warning: no validation split (one document); give more text\n");
    return;
  }
  fmt::print("  val: {:.4f} bytes per token; set model.vocab_size: {}\n", r.val_bytes_per_token(),
             r.vocab_size);
  fmt::print("  val unigram entropy: {:.4f} nats per token\n", r.val_unigram_entropy_nats);
  fmt::print("  a model must reach eval loss <= 60% of that entropy = {:.4f} nats\n",
             0.6 * r.val_unigram_entropy_nats);
}

}  // namespace

int main(int argc, char** argv) {
  autoloco::PrepareOptions options;
  BenchRequest bench;
  TaskRequest task;
  try {
    if (!parse(argc, argv, options, bench, task)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  } catch (const UsageError& e) {
    fmt::print(stderr, "autoloco-prepare: {}\nrun 'autoloco-prepare --help' for usage\n", e.what());
    return 2;
  }
  try {
    if (bench.requested) return autoloco::bench_tokenize(bench.options);
    if (task.requested) {
      autoloco::tokenize_task_file(task.options);
      return 0;
    }
    const autoloco::Timer timer;
    const autoloco::PrepareReport report = autoloco::prepare_corpus(options);
    print_summary(options, report, timer.seconds());
  } catch (const autoloco::DataError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
