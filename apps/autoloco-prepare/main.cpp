// autoloco-prepare: turns a directory of text (e.g. Python's reST docs) into byte-level
// train/val token shards for autoloco-train, and reports the entropy bound to beat.
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

namespace {

constexpr const char* kUsage = R"(usage: autoloco-prepare [options] INPUT...

Reads text files (INPUTs are files or directories, walked recursively in sorted order),
tokenizes them as bytes (vocabulary 256) and writes token shards for autoloco-train:
  OUT/train_000.bin ...  OUT/val_000.bin ...  OUT/prepare.json
Each file goes wholly to train or val; documents are separated by a newline byte.

options:
  --out DIR           output directory (default data/pydoc, where the quickstart config reads)
  --val-fraction F    expected share of files in the validation split, in (0, 1) (default 0.05)
  --ext LIST          keep only files ending in one of these comma-separated suffixes, e.g.
                      .rst,.txt (default: every file with no NUL byte in its first 4 KiB)
  --shard-tokens N    maximum tokens per shard (default 8388608)
  --seed S            seed of the per-file train/val split (default 1337)
  --overwrite         replace prepared data already in DIR
  -h, --help          print this help

example:
  autoloco-prepare --out data/pydoc /usr/share/doc/python3.11/html/_sources
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

// Returns false when --help was asked for.
bool parse(int argc, char** argv, autoloco::PrepareOptions& options) {
  Args args(argc, argv);
  while (!args.done()) {
    const std::string arg = args.next();
    if (arg == "-h" || arg == "--help") return false;
    if (arg == "--out") {
      options.out_dir = args.value(arg);
    } else if (arg == "--val-fraction") {
      options.val_fraction = parse_double(arg, args.value(arg));
    } else if (arg == "--ext") {
      options.extensions = split_list(args.value(arg));
    } else if (arg == "--shard-tokens") {
      options.shard_tokens = parse_count(arg, args.value(arg));
    } else if (arg == "--seed") {
      options.seed = parse_count(arg, args.value(arg));
    } else if (arg == "--overwrite") {
      args.expect_no_value(arg);
      options.overwrite = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    } else {
      options.inputs.push_back(arg);
    }
  }
  if (options.inputs.empty()) throw UsageError("no INPUT given: name text files or directories");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0)) {
    throw UsageError(fmt::format("--val-fraction must be in (0, 1), got {}", options.val_fraction));
  }
  if (options.shard_tokens == 0) throw UsageError("--shard-tokens must be positive");
  return true;
}

void print_summary(const autoloco::PrepareOptions& options, const autoloco::PrepareReport& r,
                   double seconds) {
  fmt::print("prepared {} files ({} bytes; {} skipped by the filters) into {} in {:.1f} s\n",
             r.files, r.bytes, r.skipped_files, options.out_dir, seconds);
  fmt::print("  train: {} files, {} tokens, {} shards\n", r.train_files, r.train_tokens,
             r.train_shards.size());
  fmt::print("  val:   {} files, {} tokens, {} shards\n", r.val_files, r.val_tokens,
             r.val_shards.size());
  fmt::print("  vocab_size {} (bytes)\n", r.vocab_size);
  if (r.val_files == 0) {
    fmt::print("  warning: no validation split (one input file); give more files\n");
    return;
  }
  fmt::print("  val unigram entropy: {:.4f} nats\n", r.val_unigram_entropy_nats);
  fmt::print("  a model must reach eval loss <= 60% of that entropy = {:.4f} nats\n",
             0.6 * r.val_unigram_entropy_nats);
}

}  // namespace

int main(int argc, char** argv) {
  autoloco::PrepareOptions options;
  try {
    if (!parse(argc, argv, options)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  } catch (const UsageError& e) {
    fmt::print(stderr, "autoloco-prepare: {}\nrun 'autoloco-prepare --help' for usage\n", e.what());
    return 2;
  }
  try {
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
