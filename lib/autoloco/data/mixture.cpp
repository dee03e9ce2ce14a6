// Mixture: resolving sources' directories, opening their splits, one tokenizer for all.
#include "autoloco/data/mixture.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <utility>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

namespace fs = std::filesystem;

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::string in_dir(const std::string& dir, const char* pattern) {
  return (fs::path(dir) / pattern).string();
}

// Every split of every source must speak the first train split's tokenizer.
void check_one_tokenizer(const std::vector<MixtureSource>& sources) {
  const std::optional<PreparedData>& first = sources[0].train->prepared();
  if (!first) return;
  for (const MixtureSource& s : sources) {
    for (const TokenDataset* split : {s.train.get(), s.val.get()}) {
      const std::optional<PreparedData>& p = split->prepared();
      if (!p || first->same_tokenizer(*p)) continue;
      throw DataError(fmt::format(
          "{} and {} come from different tokenizers: {} and {}; a mixture's sources must be "
          "prepared with one tokenizer (autoloco-prepare --tokenizer-model the same file)",
          sources[0].train->what(), split->what(), first->describe(), p->describe()));
    }
  }
}

}  // namespace

SourcePatterns source_patterns(const DataSource& source, const std::string& key) {
  SourcePatterns out;
  bool all_dirs = true;
  for (const std::string& p : source.train) {
    if (is_directory(p)) {
      out.train.push_back(in_dir(p, "train_*.bin"));
    } else {
      out.train.push_back(p);
      all_dirs = false;
    }
  }
  for (const std::string& p : source.val)
    out.val.push_back(is_directory(p) ? in_dir(p, "val_*.bin") : p);
  if (out.val.empty()) {
    if (!all_dirs) {
      throw ConfigError(fmt::format(
          "{}.val is missing: source '{}' names shard files, not a prepared directory, so its "
          "validation shards cannot be guessed; give {}.val (paths or globs)",
          key, source.name, key));
    }
    for (const std::string& p : source.train)
      out.val.push_back(in_dir(p, "val_*.bin"));
  }
  return out;
}

Mixture::Mixture(const DataConfig& data, int64_t vocab_size) : mixed_(!data.sources.empty()) {
  if (!mixed_) {
    MixtureSource s;
    s.name = "train";
    s.train = std::make_unique<TokenDataset>(data.train, vocab_size, "data.train");
    s.val = std::make_unique<TokenDataset>(data.val, vocab_size, "data.val");
    check_same_tokenizer(s.train->prepared(), s.val->prepared());
    sources_.push_back(std::move(s));
    return;
  }
  double total = 0.0;
  for (const DataSource& d : data.sources)
    total += d.weight;
  for (size_t i = 0; i < data.sources.size(); ++i) {
    const DataSource& d = data.sources[i];
    const std::string key = fmt::format("data.sources[{}]", i);
    const SourcePatterns patterns = source_patterns(d, key);
    MixtureSource s;
    s.name = d.name;
    s.weight = d.weight / total;
    s.train = std::make_unique<TokenDataset>(patterns.train, vocab_size,
                                             fmt::format("{}.train ({})", key, d.name));
    s.val = std::make_unique<TokenDataset>(patterns.val, vocab_size,
                                           fmt::format("{}.val ({})", key, d.name));
    sources_.push_back(std::move(s));
  }
  check_one_tokenizer(sources_);
}

double Mixture::mean_loss(const std::vector<double>& losses) const {
  double sum = 0.0;
  for (size_t i = 0; i < sources_.size(); ++i)
    sum += sources_[i].weight * losses.at(i);
  return sum;
}

double Mixture::val_bytes_per_token() const {
  double bytes = 0.0;
  for (const MixtureSource& s : sources_) {
    const std::optional<PreparedData>& p = s.val->prepared();
    if (!p) return static_cast<double>(NAN);
    bytes += s.weight * p->val_bytes_per_token;
  }
  return bytes;
}

double Mixture::bits_per_byte(const std::vector<double>& losses) const {
  return autoloco::bits_per_byte(mean_loss(losses), val_bytes_per_token());
}

double Mixture::source_bits_per_byte(size_t s, double loss) const {
  const std::optional<PreparedData>& p = sources_.at(s).val->prepared();
  return p ? autoloco::bits_per_byte(loss, p->val_bytes_per_token) : static_cast<double>(NAN);
}

uint64_t Mixture::train_tokens() const {
  uint64_t n = 0;
  for (const MixtureSource& s : sources_)
    n += s.train->num_tokens();
  return n;
}

uint64_t Mixture::val_tokens() const {
  uint64_t n = 0;
  for (const MixtureSource& s : sources_)
    n += s.val->num_tokens();
  return n;
}

size_t Mixture::train_shards() const {
  size_t n = 0;
  for (const MixtureSource& s : sources_)
    n += s.train->num_shards();
  return n;
}

}  // namespace autoloco
