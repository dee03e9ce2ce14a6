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

// Draws windows of seq_len + 1 consecutive tokens from one shard each. Sample i is a pure
// function of (seed, dc, member, i), so restoring the cursor replays the stream exactly and
// every rank reads its own stream without any coordination.
class BatchStream {
 public:
  // `data` must outlive the stream. `shard_subset` lists shard indices to draw from (see
  // shards_for_dc); empty means all shards.
  BatchStream(const TokenDataset& data, int64_t seq_len, int64_t batch_size, uint64_t seed, int dc,
              int member, std::vector<size_t> shard_subset);

  // The next batch_size() samples, or the next `rows` (a micro-batch of an adaptive batch).
  Batch next();
  Batch next(int64_t rows);
  StreamCursor cursor() const { return cursor_; }
  void set_cursor(StreamCursor cursor) { cursor_ = cursor; }

  int64_t seq_len() const { return seq_len_; }
  int64_t batch_size() const { return batch_size_; }

 private:
  // (shard index, start token) of sample i.
  std::pair<size_t, uint64_t> locate(uint64_t sample) const;

  const TokenDataset& data_;
  int64_t seq_len_;
  int64_t batch_size_;
  uint64_t key_;                // mixes seed, dc and member
  std::vector<size_t> shards_;  // shards with at least one window
  std::vector<uint64_t> ends_;  // cumulative window counts of shards_
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
