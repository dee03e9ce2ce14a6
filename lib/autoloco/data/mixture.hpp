// The corpora a run trains on: data.train and data.val (one source), or data.sources, a
// weighted mixture of prepared corpora, each with its own validation split.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/prepared_data.hpp"
#include "autoloco/data/stream.hpp"

namespace autoloco {

struct MixtureSource {
  std::string name;
  double weight = 1.0;  // normalised: the weights sum to 1
  std::unique_ptr<TokenDataset> train;
  std::unique_ptr<TokenDataset> val;
};

// A source's shard patterns once a prepared directory is spelled out: DIR becomes
// DIR/train_*.bin, and an empty val DIR/val_*.bin.
struct SourcePatterns {
  std::vector<std::string> train;
  std::vector<std::string> val;
};
SourcePatterns source_patterns(const DataSource& source, const std::string& key);

class Mixture {
 public:
  // Opens every split and checks that all come from one tokenizer of `vocab_size` tokens.
  Mixture(const DataConfig& data, int64_t vocab_size);

  // data.sources was given: metrics and eval then report per source.
  bool mixed() const { return mixed_; }
  size_t size() const { return sources_.size(); }
  const MixtureSource& operator[](size_t i) const { return sources_[i]; }

  // The tokenizer of the train shards (the first source's): what init_from is checked against.
  const std::optional<PreparedData>& prepared() const { return sources_[0].train->prepared(); }

  // The stream's sources, each drawing from the shards `subset_of(source index)` lists.
  template <class SubsetOf>
  std::vector<StreamSource> stream_sources(SubsetOf subset_of) const {
    std::vector<StreamSource> out;
    for (size_t i = 0; i < sources_.size(); ++i)
      out.push_back({sources_[i].train.get(), sources_[i].weight, subset_of(i)});
    return out;
  }

  // Bits per byte of the mixture: the weighted bits per token over the weighted bytes per
  // token; NaN when a val split's bytes per token are unknown.
  double bits_per_byte(const std::vector<double>& losses) const;
  // Source s's bits per byte at `loss` on its val split; NaN when its bytes per token are unknown.
  double source_bits_per_byte(size_t s, double loss) const;
  // The weights' mean of the val splits' bytes per token; NaN when one is unknown.
  double val_bytes_per_token() const;
  // The weighted mean of per-source losses.
  double mean_loss(const std::vector<double>& losses) const;

  uint64_t train_tokens() const;
  uint64_t val_tokens() const;
  size_t train_shards() const;

 private:
  bool mixed_ = false;
  std::vector<MixtureSource> sources_;
};

}  // namespace autoloco
