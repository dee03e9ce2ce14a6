// TokenDataset: glob expansion, shard opening and the vocabulary check.
#include "autoloco/data/dataset.hpp"

#include <glob.h>

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// globfree on every path out of the expansion, including exceptions.
struct GlobResult {
  glob_t value{};
  ~GlobResult() { globfree(&value); }
};

void expand_one(const std::string& pattern, const std::string& what,
                std::vector<std::string>& out) {
  GlobResult result;
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &result.value);
  if (rc == GLOB_NOMATCH) {
    throw DataError(
        fmt::format("{}: '{}' matches no file; create token shards with "
                    "autoloco-prepare or fix {}",
                    what, pattern, what));
  }
  if (rc != 0) {
    throw DataError(
        fmt::format("{}: cannot expand '{}' (glob error {}); check that the "
                    "directory exists and is readable",
                    what, pattern, rc));
  }
  for (size_t i = 0; i < result.value.gl_pathc; ++i)
    out.emplace_back(result.value.gl_pathv[i]);
}

void check_vocab(const Shard& shard, int64_t vocab_size, const std::string& what) {
  const uint32_t max_token = shard.max_token();
  if (static_cast<int64_t>(max_token) >= vocab_size) {
    throw DataError(
        fmt::format("{}: token shard '{}' holds token id {} but model.vocab_size is "
                    "{}; raise model.vocab_size or prepare the shards with the "
                    "model's tokenizer",
                    what, shard.path(), max_token, vocab_size));
  }
}

}  // namespace

std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& patterns,
                                               const std::string& what) {
  if (patterns.empty()) {
    throw DataError(
        fmt::format("{} is empty: list at least one shard path or glob (made by "
                    "autoloco-prepare)",
                    what));
  }
  std::vector<std::string> paths;
  for (const auto& pattern : patterns)
    expand_one(pattern, what, paths);
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return paths;
}

TokenDataset::TokenDataset(const std::vector<std::string>& patterns, int64_t vocab_size,
                           std::string what)
    : what_(std::move(what)) {
  if (vocab_size <= 0) {
    throw DataError(fmt::format("{}: vocab_size must be positive, got {}", what_, vocab_size));
  }
  const std::vector<std::string> paths = expand_shard_patterns(patterns, what_);
  // Before the scan of every token below: the tokenizer's vocabulary makes the clearer message.
  prepared_ = read_prepared_data(paths, what_);
  if (prepared_) check_prepared_vocab(*prepared_, vocab_size, what_);
  for (const auto& path : paths) {
    Shard shard(path);
    // A full scan of every shard at open: shards are a few MB and this runs once, and it
    // turns an out-of-range embedding lookup deep in the model into a clear message here.
    check_vocab(shard, vocab_size, what_);
    num_tokens_ += shard.size();
    shards_.push_back(std::move(shard));
  }
}

}  // namespace autoloco
