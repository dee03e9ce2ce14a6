// Batch streams: counter-based sampling of windows, evaluation batches, by_shard partition.
#include "autoloco/data/stream.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "autoloco/util/error.hpp"
#include "autoloco/util/splitmix.hpp"

namespace autoloco {
namespace {

uint64_t stream_key(uint64_t seed, int dc, int member) {
  uint64_t key = splitmix64_mix(seed + kSplitmixGamma);
  key = splitmix64_mix(key + kSplitmixGamma + static_cast<uint64_t>(static_cast<int64_t>(dc)));
  return splitmix64_mix(key + kSplitmixGamma + static_cast<uint64_t>(static_cast<int64_t>(member)));
}

std::string shard_list(const TokenDataset& data, const std::vector<size_t>& indices) {
  std::vector<std::string> paths;
  for (size_t i : indices)
    paths.push_back("'" + data.shards()[i].path() + "'");
  return fmt::format("{}", fmt::join(paths, ", "));
}

void check_shape(int64_t seq_len, int64_t batch_size) {
  if (seq_len <= 0 || batch_size <= 0) {
    throw DataError(
        fmt::format("seq_len ({}) and batch_size ({}) must be positive", seq_len, batch_size));
  }
}

// A [batch_size, seq_len + 1] tensor of windows becomes inputs and next-token targets.
Batch split_windows(const torch::Tensor& windows, int64_t seq_len) {
  return Batch{windows.slice(1, 0, seq_len).contiguous(),
               windows.slice(1, 1, seq_len + 1).contiguous()};
}

// Index of the group holding item `item` given cumulative end offsets.
size_t group_of(const std::vector<uint64_t>& ends, uint64_t item) {
  return static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), item) - ends.begin());
}

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  __extension__ using u128 = unsigned __int128;
  return static_cast<uint64_t>(static_cast<u128>(a) * b % m);
}

// A step near the golden fraction of n and coprime to it: s -> s * step mod n is then a
// permutation of [0, n) whose every prefix is spread evenly over the range.
uint64_t spread_step(uint64_t n) {
  uint64_t step =
      std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(n) * 0.6180339887));
  while (std::gcd(step, n) != 1)
    ++step;
  return step;
}

}  // namespace

BatchStream::BatchStream(const TokenDataset& data, int64_t seq_len, int64_t batch_size,
                         uint64_t seed, int dc, int member, std::vector<size_t> shard_subset)
    : data_(data), seq_len_(seq_len), batch_size_(batch_size), key_(stream_key(seed, dc, member)) {
  check_shape(seq_len, batch_size);
  if (shard_subset.empty()) {
    shard_subset.resize(data.num_shards());
    std::iota(shard_subset.begin(), shard_subset.end(), size_t{0});
  }
  uint64_t total = 0;
  const auto window = static_cast<uint64_t>(seq_len) + 1;
  for (size_t index : shard_subset) {
    if (index >= data.num_shards()) {
      throw DataError(fmt::format("{}: shard index {} out of range ({} shards)", data.what(), index,
                                  data.num_shards()));
    }
    const uint64_t size = data.shards()[index].size();
    if (size < window) continue;  // too short for even one sample
    // Weighting shards by their window count makes every window equally likely.
    total += size - window + 1;
    shards_.push_back(index);
    ends_.push_back(total);
  }
  if (shards_.empty()) {
    throw DataError(
        fmt::format("{}: no shard holds seq_len + 1 = {} tokens (shards: {}); "
                    "prepare longer shards or lower model.seq_len",
                    data.what(), window, shard_list(data, shard_subset)));
  }
}

std::pair<size_t, uint64_t> BatchStream::locate(uint64_t sample) const {
  // splitmix64 evaluated at position `sample`: random access, no state beyond the counter.
  const uint64_t draw = splitmix64_at(key_, sample) % ends_.back();
  const size_t group = group_of(ends_, draw);
  const uint64_t start = draw - (group == 0 ? 0 : ends_[group - 1]);
  return {shards_[group], start};
}

Batch BatchStream::next() {
  return next(batch_size_);
}

Batch BatchStream::next(int64_t rows) {
  check_shape(seq_len_, rows);
  torch::Tensor windows = torch::empty({rows, seq_len_ + 1}, torch::kLong);
  int64_t* out = windows.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    const auto [shard, start] = locate(cursor_.samples++);
    data_.shards()[shard].copy_tokens(start, seq_len_ + 1, out + row * (seq_len_ + 1));
  }
  return split_windows(windows, seq_len_);
}

Batch eval_batch(const TokenDataset& val, int64_t index, int64_t batch_size, int64_t seq_len) {
  check_shape(seq_len, batch_size);
  if (index < 0) throw DataError(fmt::format("eval batch index {} is negative", index));
  // Windows of seq_len + 1 tokens at stride seq_len: inputs never overlap and every token
  // after a shard's first is a target exactly once per pass.
  const auto stride = static_cast<uint64_t>(seq_len);
  std::vector<uint64_t> ends;
  uint64_t total = 0;
  for (const auto& shard : val.shards()) {
    total += shard.size() > stride ? (shard.size() - 1) / stride : 0;
    ends.push_back(total);
  }
  if (total == 0) {
    std::vector<size_t> all(val.num_shards());
    std::iota(all.begin(), all.end(), size_t{0});
    throw DataError(
        fmt::format("{}: no shard holds seq_len + 1 = {} tokens (shards: {}); "
                    "prepare a larger validation split or lower model.seq_len",
                    val.what(), seq_len + 1, shard_list(val, all)));
  }
  const uint64_t step = spread_step(total);
  torch::Tensor windows = torch::empty({batch_size, seq_len + 1}, torch::kLong);
  int64_t* out = windows.data_ptr<int64_t>();
  for (int64_t row = 0; row < batch_size; ++row) {
    const uint64_t slot = static_cast<uint64_t>(index * batch_size + row) % total;
    const uint64_t window = mul_mod(slot, step, total);
    const size_t shard = group_of(ends, window);
    const uint64_t local = window - (shard == 0 ? 0 : ends[shard - 1]);
    val.shards()[shard].copy_tokens(local * stride, seq_len + 1, out + row * (seq_len + 1));
  }
  return split_windows(windows, seq_len);
}

std::vector<size_t> shards_for_dc(size_t num_shards, int dc, int num_dcs) {
  if (num_dcs <= 0 || dc < 0 || dc >= num_dcs) {
    throw DataError(fmt::format("datacenter {} out of range for {} datacenters", dc, num_dcs));
  }
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(dc); i < num_shards; i += static_cast<size_t>(num_dcs)) {
    mine.push_back(i);
  }
  if (mine.empty()) {
    throw DataError(
        fmt::format("data.partition=by_shard: {} train shards for {} datacenters "
                    "leave datacenter {} without data; prepare at least {} shards "
                    "(autoloco-prepare --shard-tokens smaller) or use "
                    "data.partition=iid",
                    num_shards, num_dcs, dc, num_dcs));
  }
  return mine;
}

}  // namespace autoloco
