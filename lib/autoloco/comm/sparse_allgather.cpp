#include "autoloco/comm/sparse_allgather.hpp"

#include <algorithm>
#include <cstring>

namespace autoloco {
namespace {

constexpr int kSparseTag = 7304;

}  // namespace

LinkTraffic SparseAllgather::traffic(size_t count, const SparseCodec& codec, size_t k) const {
  LinkTraffic t;
  if (peers_->size() <= 1) return t;
  // Every rank encodes as many values, so every message has the same size.
  const auto message = static_cast<int64_t>(codec.encoded_bytes(count) + k * sizeof(double));
  const auto peers = static_cast<int64_t>(peers_->size() - 1);
  t.sent_bytes = peers * message;
  t.phases = 1;
  t.critical_bytes = peers * message;
  t.all_bytes = static_cast<int64_t>(peers_->size()) * peers * message;
  return t;
}

LinkTraffic SparseAllgather::run(float* payload, size_t count, const SparseCodec& codec,
                                 double* scalars, size_t k, uint64_t stream, float* residual) {
  const auto g = static_cast<size_t>(peers_->size());
  const auto me = static_cast<size_t>(peers_->rank());
  const size_t encoded = codec.encoded_bytes(count);
  const size_t scalar_bytes = k * sizeof(double);
  in_.resize(g);
  std::vector<std::byte>& own = in_[me];
  own.resize(encoded + scalar_bytes);
  // A stream of its own per rank: no two contributions share their rounding noise.
  encode_sparse(codec, payload, count, own.data(), piece_stream(stream, me + 1));
  if (scalar_bytes > 0) std::memcpy(own.data() + encoded, scalars, scalar_bytes);
  if (g > 1) exchange(own.size());
  if (residual != nullptr) {
    decode_sparse(codec, own.data(), count, residual);
    for (size_t i = 0; i < count; ++i)
      residual[i] = payload[i] - residual[i];
  }
  std::fill(payload, payload + count, 0.0F);
  std::vector<double> sums(k, 0.0);
  for (size_t r = 0; r < g; ++r) {
    decode_add_sparse(codec, in_[r].data(), count, payload);
    for (size_t j = 0; j < k; ++j) {
      double s = 0.0;
      std::memcpy(&s, in_[r].data() + encoded + j * sizeof(double), sizeof(s));
      sums[j] += s;
    }
  }
  std::copy(sums.begin(), sums.end(), scalars);
  return traffic(count, codec, k);
}

void SparseAllgather::exchange(size_t bytes) {
  const auto g = static_cast<size_t>(peers_->size());
  const auto me = static_cast<size_t>(peers_->rank());
  std::vector<PeerExchange::Send> sends;
  std::vector<PeerExchange::Recv> recvs;
  for (size_t r = 0; r < g; ++r) {
    if (r == me) continue;
    in_[r].resize(bytes);
    recvs.push_back({static_cast<int>(r), in_[r].data(), bytes});
    sends.push_back({static_cast<int>(r), in_[me].data(), bytes});
  }
  peers_->exchange(sends, recvs, kSparseTag);
}

}  // namespace autoloco
