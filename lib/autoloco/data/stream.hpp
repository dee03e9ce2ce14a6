// Per-rank deterministic batch streams over a TokenDataset, the fixed evaluation batches,
// and the by_shard partition of train shards across datacenters.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "autoloco/data/dataset.hpp"

namespace autoloco {

// Where a stream stands; saved in checkpoints so a resumed run draws the same samples.
struct StreamCursor {
  uint64_t samples = 0;
};

struct Batch {
  torch::Tensor inputs;   // int64 [batch_size, seq_len]
  torch::Tensor targets;  // int64 [batch_size, seq_len]: inputs shifted left by one token
};

// One corpus of a mixture as a stream sees it.
struct StreamSource {
  const TokenDataset* data = nullptr;  // must outlive the stream
  double weight = 1.0;                 // relative share of the samples
  std::vector<size_t> shard_subset;    // shard indices to draw from (shards_for_dc); empty: all
};

// Draws windows of seq_len + 1 consecutive tokens from one shard each. Sample i is a pure
// function of (seed, dc, member, i), so restoring the cursor replays the stream exactly and
// every rank reads its own stream without any coordination. With several sources, sample i's
// source is the golden-ratio (Weyl) sequence's i-th point against the cumulative weights, so
// every prefix of the stream holds each source within a few samples of its weight, and its
// window comes from that source's own counter-based draw (docs/data.md, Mixtures).
class BatchStream {
 public:
  // `data` must outlive the stream. `shard_subset` lists shard indices to draw from (see
  // shards_for_dc); empty means all shards.
  BatchStream(const TokenDataset& data, int64_t seq_len, int64_t batch_size, uint64_t seed, int dc,
              int member, std::vector<size_t> shard_subset);
  // A mixture; one source is the constructor above, sample for sample.
  BatchStream(const std::vector<StreamSource>& sources, int64_t seq_len, int64_t batch_size,
              uint64_t seed, int dc, int member);

  // The next batch_size() samples, or the next `rows` (a micro-batch of an adaptive batch).
  Batch next();
  Batch next(int64_t rows);
  StreamCursor cursor() const { return cursor_; }
  void set_cursor(StreamCursor cursor);
  // Samples drawn so far from each source, in the order given.
  const std::vector<uint64_t>& samples_by_source() const { return drawn_; }

  int64_t seq_len() const { return seq_len_; }
  int64_t batch_size() const { return batch_size_; }

 private:
  struct Source {
    const TokenDataset* data;
    uint64_t key;                // its draws' key: the stream's, or mixed with its index
    std::vector<size_t> shards;  // shards with at least one window
    std::vector<uint64_t> ends;  // cumulative window counts of shards
    double cumulative_weight;    // upper end of its interval in [0, 1)
  };

  static Source open_source(const StreamSource& source, int64_t seq_len, uint64_t key);
  // Which source sample i comes from.
  size_t source_of(uint64_t sample) const;
  // (source, shard index, start token) of sample i.
  struct Place {
    size_t source;
    size_t shard;
    uint64_t start;
  };
  Place locate(uint64_t sample) const;

  int64_t seq_len_;
  int64_t batch_size_;
  uint64_t key_;  // mixes seed, dc and member
  std::vector<Source> sources_;
  std::vector<uint64_t> drawn_;  // samples drawn per source up to cursor_
  StreamCursor cursor_;
};

// The index-th evaluation batch: the same on every rank and at every evaluation, whatever
// the seed. Windows tile the val split without overlap and are visited in a spread-out order,
// so the first few batches already cover the whole split; indices past the end wrap around.
Batch eval_batch(const TokenDataset& val, int64_t index, int64_t batch_size, int64_t seq_len);

// Shard indices dc, dc + num_dcs, ... for data.partition=by_shard. A dc with no shard is a
// DataError naming the counts.
std::vector<size_t> shards_for_dc(size_t num_shards, int dc, int num_dcs);

}  // namespace autoloco
