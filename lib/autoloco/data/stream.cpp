// Batch streams: counter-based sampling of windows, evaluation batches, by_shard partition.
#include "autoloco/data/stream.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
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

// A source's draws are independent of the others' and of the plain stream's.
uint64_t source_key(uint64_t stream_key, size_t index) {
  return splitmix64_mix(stream_key + kSplitmixGamma * (static_cast<uint64_t>(index) + 2));
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
    : BatchStream({StreamSource{&data, 1.0, std::move(shard_subset)}}, seq_len, batch_size, seed,
                  dc, member) {}

BatchStream::BatchStream(const std::vector<StreamSource>& sources, int64_t seq_len,
                         int64_t batch_size, uint64_t seed, int dc, int member)
    : seq_len_(seq_len), batch_size_(batch_size), key_(stream_key(seed, dc, member)) {
  check_shape(seq_len, batch_size);
  if (sources.empty()) throw DataError("a batch stream needs at least one source");
  double total_weight = 0.0;
  for (const StreamSource& s : sources) {
    if (!(s.weight > 0.0) || !std::isfinite(s.weight)) {
      throw DataError(
          fmt::format("{}: source weight must be positive, got {}", s.data->what(), s.weight));
    }
    total_weight += s.weight;
  }
  double cumulative = 0.0;
  for (size_t i = 0; i < sources.size(); ++i) {
    cumulative += sources[i].weight / total_weight;
    // One source keeps the stream's own key: its samples are those of a plain stream.
    const uint64_t key = sources.size() == 1 ? key_ : source_key(key_, i);
    sources_.push_back(open_source(sources[i], seq_len, key));
    sources_.back().cumulative_weight = cumulative;
  }
  sources_.back().cumulative_weight = 1.0;  // rounding must not leave a gap at the top
  drawn_.assign(sources_.size(), 0);
}

BatchStream::Source BatchStream::open_source(const StreamSource& source, int64_t seq_len,
                                             uint64_t key) {
  const TokenDataset& data = *source.data;
  std::vector<size_t> subset = source.shard_subset;
  if (subset.empty()) {
    subset.resize(data.num_shards());
    std::iota(subset.begin(), subset.end(), size_t{0});
  }
  Source out{&data, key, {}, {}, 0.0};
  uint64_t total = 0;
  const auto window = static_cast<uint64_t>(seq_len) + 1;
  for (size_t index : subset) {
    if (index >= data.num_shards()) {
      throw DataError(fmt::format("{}: shard index {} out of range ({} shards)", data.what(), index,
                                  data.num_shards()));
    }
    const uint64_t size = data.shards()[index].size();
    if (size < window) continue;  // too short for even one sample
    // Weighting shards by their window count makes every window equally likely.
    total += size - window + 1;
    out.shards.push_back(index);
    out.ends.push_back(total);
  }
  if (out.shards.empty()) {
    throw DataError(
        fmt::format("{}: no shard holds seq_len + 1 = {} tokens (shards: {}); "
                    "prepare longer shards or lower model.seq_len",
                    data.what(), window, shard_list(data, subset)));
  }
  return out;
}

size_t BatchStream::source_of(uint64_t sample) const {
  if (sources_.size() == 1) return 0;
  // The additive recurrence with the golden ratio's fraction of 2^64: the most evenly spread
  // sequence there is, so a source's count after n samples is within O(log n) of n x weight.
  const uint64_t point = key_ + sample * kSplitmixGamma;
  const double u = static_cast<double>(point >> 11) * 0x1.0p-53;
  size_t s = 0;
  while (u >= sources_[s].cumulative_weight)
    ++s;
  return s;
}

BatchStream::Place BatchStream::locate(uint64_t sample) const {
  const size_t s = source_of(sample);
  const Source& source = sources_[s];
  // splitmix64 evaluated at position `sample`: random access, no state beyond the counter.
  const uint64_t draw = splitmix64_at(source.key, sample) % source.ends.back();
  const size_t group = group_of(source.ends, draw);
  const uint64_t start = draw - (group == 0 ? 0 : source.ends[group - 1]);
  return {s, source.shards[group], start};
}

void BatchStream::set_cursor(StreamCursor cursor) {
  // The counts are a function of the cursor: replaying the choices costs nanoseconds a sample.
  drawn_.assign(sources_.size(), 0);
  if (sources_.size() == 1) {
    drawn_[0] = cursor.samples;
  } else {
    for (uint64_t i = 0; i < cursor.samples; ++i)
      ++drawn_[source_of(i)];
  }
  cursor_ = cursor;
}

Batch BatchStream::next() {
  return next(batch_size_);
}

Batch BatchStream::next(int64_t rows) {
  check_shape(seq_len_, rows);
  torch::Tensor windows = torch::empty({rows, seq_len_ + 1}, torch::kLong);
  int64_t* out = windows.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    const Place p = locate(cursor_.samples++);
    ++drawn_[p.source];
    sources_[p.source].data->shards()[p.shard].copy_tokens(p.start, seq_len_ + 1,
                                                           out + row * (seq_len_ + 1));
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
