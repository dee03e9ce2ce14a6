#include "autoloco/comm/hierarchical_allreduce.hpp"

#include <algorithm>

#include "autoloco/util/env_limit.hpp"

namespace autoloco {
namespace {

// Each all-reduce's messages stay well below MPI's int count of bytes; larger shards go in
// pieces, the scalars riding with the first. Tests lower the piece
// (AUTOLOCO_TEST_MAX_PIECE_BYTES) to cross it with small buffers.
size_t max_piece_bytes() {
  static const size_t bytes = env_limit("AUTOLOCO_TEST_MAX_PIECE_BYTES", size_t{1} << 30, 4);
  return bytes;
}

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(Communicator& intra, WanLink& inter)
    : intra_(intra), inter_(inter) {}

size_t HierarchicalAllreduce::shard_size(size_t n, int members) {
  const auto m = static_cast<size_t>(members);
  return (n + m - 1) / m;
}

void HierarchicalAllreduce::allreduce_sum(float* data, size_t n, double* scalars, size_t k,
                                          const WireCodec& codec, uint64_t stream,
                                          float* residual) {
  if (inter_.dcs() <= 1) return;  // one dc: its members already agree
  const int members = intra_.size();
  const size_t shard = shard_size(n, members);
  const size_t begin = std::min(n, shard * static_cast<size_t>(intra_.rank()));
  const size_t end = std::min(n, begin + shard);
  if (n == shard * static_cast<size_t>(members)) {
    // Even shards: reduce and gather in place, no copies.
    reduce_shard(data + begin, shard, scalars, k, codec, stream, residual);
    if (members > 1) intra_.allgather(data + begin, data, shard, DType::f32);
    return;
  }
  // Uneven: every member reduces a zero-padded shard of the same length.
  shard_.assign(shard, 0.0F);
  std::copy(data + begin, data + end, shard_.begin());
  reduce_shard(shard_.data(), shard, scalars, k, codec, stream, residual);
  gathered_.resize(shard * static_cast<size_t>(members));
  intra_.allgather(shard_.data(), gathered_.data(), shard, DType::f32);
  std::copy(gathered_.begin(), gathered_.begin() + static_cast<std::ptrdiff_t>(n), data);
}

void HierarchicalAllreduce::allreduce_shard_sum(float* shard, size_t count, double* scalars,
                                                size_t k, const WireCodec& codec, uint64_t stream,
                                                float* residual) {
  if (inter_.dcs() <= 1) return;
  reduce_shard(shard, count, scalars, k, codec, stream, residual);
}

double HierarchicalAllreduce::sum_over_members(double value) {
  if (intra_.size() > 1) intra_.allreduce_sum(&value, 1);
  return value;
}

void HierarchicalAllreduce::reduce_shard(float* shard, size_t count, double* scalars, size_t k,
                                         const WireCodec& codec, uint64_t stream, float* residual) {
  if (residual != nullptr) {
    for (size_t i = 0; i < count; ++i)
      shard[i] += residual[i];
  }
  const size_t piece = max_piece_bytes() / sizeof(float);  // no format takes more than 4 bytes
  size_t done = 0;
  do {
    const size_t n = std::min(piece, count - done);
    inter_.allreduce(shard + done, n, codec, scalars, done == 0 ? k : 0,
                     piece_stream(stream, done / piece),
                     residual != nullptr ? residual + done : nullptr);
    done += n;
  } while (done < count);
}

}  // namespace autoloco
