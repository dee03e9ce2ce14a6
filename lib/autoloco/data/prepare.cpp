// Corpus preparation: collect files, split them per file, byte-tokenize, write shards.
#include "autoloco/data/prepare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include "autoloco/data/shard.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

constexpr uint32_t kSeparator = '\n';
constexpr size_t kSniffBytes = 4096;
constexpr size_t kReadChunk = 1 << 20;

struct InputFile {
  fs::path path;
  std::string rel;  // relative to its input root: what the split hashes
  bool val = false;
};

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// A uniform number in [0, 1) fixed by the file's relative path and the seed.
double split_score(const std::string& rel, uint64_t seed) {
  const uint64_t h = mix64(fnv1a(rel) ^ mix64(seed + 0x9e3779b97f4a7c15ULL));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

bool has_suffix(const std::string& name, const std::vector<std::string>& suffixes) {
  for (const auto& s : suffixes) {
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      return true;
    }
  }
  return false;
}

bool is_prepare_output(const std::string& name) {
  const bool shard = (name.rfind("train_", 0) == 0 || name.rfind("val_", 0) == 0) &&
                     (has_suffix(name, {".bin"}) || has_suffix(name, {".bin.tmp"}));
  return shard || name == "prepare.json" || name == "prepare.json.tmp";
}

bool inside(const fs::path& file, const fs::path& dir) {
  const fs::path rel = file.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

class Collector {
 public:
  Collector(const PrepareOptions& options, fs::path out_dir)
      : options_(options), out_dir_(std::move(out_dir)) {}

  void add_input(const std::string& input) {
    const fs::path root(input);
    if (fs::is_directory(root)) {
      walk(root);
    } else if (fs::is_regular_file(root)) {
      add(root, root.filename().generic_string());
    } else {
      throw DataError(fmt::format("input '{}' is not a file or directory; check the path", input));
    }
  }

  std::vector<InputFile> files;
  size_t skipped = 0;

 private:
  void walk(const fs::path& root) {
    std::vector<InputFile> found;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      if (!keep(entry.path())) {
        ++skipped;
        continue;
      }
      found.push_back({entry.path(), entry.path().lexically_relative(root).generic_string()});
    }
    // Directory order is arbitrary; sorting makes the shards identical on every machine.
    std::sort(found.begin(), found.end(),
              [](const InputFile& a, const InputFile& b) { return a.rel < b.rel; });
    for (auto& file : found)
      add(file.path, file.rel);
  }

  bool keep(const fs::path& path) const {
    if (!options_.extensions.empty()) {
      return has_suffix(path.filename().string(), options_.extensions);
    }
    return looks_like_text(path.string());
  }

  void add(const fs::path& path, const std::string& rel) {
    const fs::path canonical = fs::weakly_canonical(path);
    // Never read our own output back in, and read a file reached twice only once.
    if (inside(canonical, out_dir_)) return;
    if (!seen_.insert(canonical.string()).second) return;
    files.push_back({path, rel});
  }

  const PrepareOptions& options_;
  fs::path out_dir_;
  std::set<std::string> seen_;
};

// Split per file so no document straddles train and val.
void assign_splits(std::vector<InputFile>& files, const PrepareOptions& options) {
  std::vector<double> scores;
  for (auto& file : files) {
    scores.push_back(split_score(file.rel, options.seed));
    file.val = scores.back() < options.val_fraction;
  }
  if (files.size() < 2) return;
  const auto val_count =
      std::count_if(files.begin(), files.end(), [](const InputFile& f) { return f.val; });
  const auto lowest = std::min_element(scores.begin(), scores.end()) - scores.begin();
  const auto highest = std::max_element(scores.begin(), scores.end()) - scores.begin();
  // Small corpora: still evaluate on something, and still train on something.
  if (val_count == 0) files[static_cast<size_t>(lowest)].val = true;
  if (static_cast<size_t>(val_count) == files.size())
    files[static_cast<size_t>(highest)].val = false;
}

// Accumulates one split's tokens and cuts them into shards of at most shard_tokens.
class SplitWriter {
 public:
  SplitWriter(fs::path dir, std::string prefix, uint64_t shard_tokens)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), shard_tokens_(shard_tokens) {}

  void add(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i)
      push(static_cast<unsigned char>(data[i]));
  }
  void push(uint32_t token) {
    buffer_.push_back(token);
    ++counts[token];
    ++tokens;
    if (buffer_.size() == shard_tokens_) flush();
  }
  void flush() {
    if (buffer_.empty()) return;
    const fs::path path = dir_ / fmt::format("{}_{:03d}.bin", prefix_, shards.size());
    write_shard(path.string(), buffer_, TokenWidth::u16);
    shards.push_back(path.string());
    buffer_.clear();
  }

  std::array<uint64_t, 256> counts{};
  uint64_t tokens = 0;
  std::vector<std::string> shards;

 private:
  fs::path dir_;
  std::string prefix_;
  uint64_t shard_tokens_;
  std::vector<uint32_t> buffer_;
};

uint64_t copy_document(const InputFile& file, SplitWriter& writer) {
  std::ifstream in(file.path, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format("cannot read input '{}': {}; check permissions", file.path.string(),
                                std::strerror(errno)));
  }
  std::vector<char> chunk(kReadChunk);
  uint64_t bytes = 0;
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto n = static_cast<size_t>(in.gcount());
    writer.add(chunk.data(), n);
    bytes += n;
  }
  if (in.bad()) {
    throw DataError(fmt::format("error while reading input '{}'", file.path.string()));
  }
  writer.push(kSeparator);
  return bytes;
}

std::vector<fs::path> existing_outputs(const fs::path& out_dir) {
  std::vector<fs::path> found;
  if (!fs::is_directory(out_dir)) return found;
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    if (is_prepare_output(entry.path().filename().string())) found.push_back(entry.path());
  }
  return found;
}

void check_options(const PrepareOptions& options) {
  if (options.inputs.empty()) throw DataError("no input files or directories given");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0)) {
    throw DataError(fmt::format("val fraction {} must be in (0, 1)", options.val_fraction));
  }
  if (options.shard_tokens == 0) throw DataError("shard tokens must be positive");
  if (options.shard_tokens > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    throw DataError(
        fmt::format("shard tokens {} exceed the shard format's int32 count", options.shard_tokens));
  }
}

void write_json(const fs::path& path, const PrepareReport& report, const PrepareOptions& options) {
  JsonObject json;
  json.add("files", static_cast<int64_t>(report.files))
      .add("train_files", static_cast<int64_t>(report.train_files))
      .add("val_files", static_cast<int64_t>(report.val_files))
      .add("bytes", static_cast<int64_t>(report.bytes))
      .add("train_tokens", static_cast<int64_t>(report.train_tokens))
      .add("val_tokens", static_cast<int64_t>(report.val_tokens))
      .add("train_shards", static_cast<int64_t>(report.train_shards.size()))
      .add("val_shards", static_cast<int64_t>(report.val_shards.size()))
      .add("val_unigram_entropy_nats", report.val_unigram_entropy_nats)
      .add("vocab_size", report.vocab_size)
      .add("tokenizer", "bytes")
      .add("document_separator", "\n")
      .add("val_fraction", options.val_fraction)
      .add("seed", static_cast<int64_t>(options.seed))
      .add("shard_tokens", static_cast<int64_t>(options.shard_tokens));
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << json.str() << "\n";
    if (!out.flush()) {
      throw DataError(fmt::format("cannot write '{}'; check free disk space", tmp.string()));
    }
  }
  fs::rename(tmp, path);
}

// With --overwrite, shards of an earlier, larger run would still match train_*.bin.
void remove_stale(const std::vector<fs::path>& before, const PrepareReport& report) {
  std::set<std::string> fresh{"prepare.json"};
  for (const auto* list : {&report.train_shards, &report.val_shards}) {
    for (const auto& shard : *list)
      fresh.insert(fs::path(shard).filename().string());
  }
  for (const auto& old : before) {
    if (fresh.count(old.filename().string()) == 0) fs::remove(old);
  }
}

PrepareReport run(const PrepareOptions& options) {
  check_options(options);
  const fs::path out_dir(options.out_dir);
  const std::vector<fs::path> before = existing_outputs(out_dir);
  if (!before.empty() && !options.overwrite) {
    throw DataError(
        fmt::format("output directory '{}' already holds prepared data ('{}'); pass "
                    "--overwrite to replace it or choose another directory",
                    out_dir.string(), before.front().filename().string()));
  }
  Collector collector(options, fs::weakly_canonical(out_dir));
  for (const auto& input : options.inputs)
    collector.add_input(input);
  if (collector.files.empty()) {
    throw DataError(
        fmt::format("no input files found in {} ({} skipped by the filters); check "
                    "the paths or --ext",
                    fmt::join(options.inputs, ", "), collector.skipped));
  }
  assign_splits(collector.files, options);
  fs::create_directories(out_dir);

  PrepareReport report;
  report.skipped_files = collector.skipped;
  SplitWriter train(out_dir, "train", options.shard_tokens);
  SplitWriter val(out_dir, "val", options.shard_tokens);
  for (const auto& file : collector.files) {
    report.bytes += copy_document(file, file.val ? val : train);
    ++(file.val ? report.val_files : report.train_files);
  }
  train.flush();
  val.flush();
  report.files = collector.files.size();
  report.train_tokens = train.tokens;
  report.val_tokens = val.tokens;
  report.train_shards = train.shards;
  report.val_shards = val.shards;
  report.val_unigram_entropy_nats = unigram_entropy_nats(val.counts);
  remove_stale(before, report);
  // Last, so a prepare.json always describes a complete set of shards.
  write_json(out_dir / "prepare.json", report, options);
  return report;
}

}  // namespace

double unigram_entropy_nats(const std::array<uint64_t, 256>& counts) {
  uint64_t total = 0;
  for (uint64_t c : counts)
    total += c;
  if (total == 0) return 0.0;
  double entropy = 0.0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(total);
    entropy -= p * std::log(p);
  }
  return entropy;
}

bool looks_like_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char head[kSniffBytes];
  in.read(head, sizeof(head));
  return std::memchr(head, 0, static_cast<size_t>(in.gcount())) == nullptr;
}

PrepareReport prepare_corpus(const PrepareOptions& options) {
  try {
    return run(options);
  } catch (const fs::filesystem_error& e) {
    throw DataError(fmt::format("autoloco-prepare: {}; check the paths and permissions", e.what()));
  }
}

}  // namespace autoloco
