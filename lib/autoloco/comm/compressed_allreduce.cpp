#include "autoloco/comm/compressed_allreduce.hpp"

#include <algorithm>
#include <cstring>

namespace autoloco {
namespace {

constexpr int kScatterTag = 7302;
constexpr int kGatherTag = 7303;

// A stream of its own for each (rank or sum, chunk), so no two encodings share their noise.
uint64_t mix(uint64_t stream, uint64_t who, uint64_t chunk) {
  uint64_t z = stream ^ (who * 0xD1B54A32D192ED03ULL) ^ (chunk * 0x8CB92BA72F3D8DD7ULL);
  z = (z ^ (z >> 33)) * 0xFF51AFD7ED558CCDULL;
  return z ^ (z >> 33);
}

}  // namespace

LinkTraffic CompressedAllreduce::traffic(size_t count, const WireCodec& codec, size_t k) const {
  LinkTraffic t;
  if (peers_->size() <= 1) return t;
  const auto g = static_cast<size_t>(peers_->size());
  std::vector<int64_t> encoded(g);
  int64_t all = 0;
  for (size_t j = 0; j < g; ++j) {
    encoded[j] = static_cast<int64_t>(codec.encoded_bytes(chunk(j, count).count));
    all += encoded[j];
  }
  const auto scalar_bytes = static_cast<int64_t>(k * sizeof(double));
  const auto peers = static_cast<int64_t>(g - 1);
  // Rank r scatters every chunk but its own, each with the scalars, and gathers its own to
  // every peer.
  auto scatter_bytes = [&](size_t r) { return all - encoded[r] + peers * scalar_bytes; };
  auto gather_bytes = [&](size_t r) { return peers * encoded[r]; };
  int64_t scatter_max = 0;
  int64_t gather_max = 0;
  for (size_t r = 0; r < g; ++r) {
    scatter_max = std::max(scatter_max, scatter_bytes(r));
    gather_max = std::max(gather_max, gather_bytes(r));
    t.all_bytes += scatter_bytes(r) + gather_bytes(r);
  }
  const auto me = static_cast<size_t>(peers_->rank());
  t.sent_bytes = scatter_bytes(me) + gather_bytes(me);
  t.phases = 2;
  t.critical_bytes = scatter_max + gather_max;
  return t;
}

void CompressedAllreduce::scatter(const float* payload, size_t count, const WireCodec& codec,
                                  const double* scalars, size_t k, uint64_t stream) {
  const auto g = static_cast<size_t>(peers_->size());
  const auto me = static_cast<size_t>(peers_->rank());
  const size_t scalar_bytes = k * sizeof(double);
  out_.resize(g);
  in_.resize(g);
  std::vector<PeerExchange::Send> sends;
  std::vector<PeerExchange::Recv> recvs;
  const size_t mine = codec.encoded_bytes(chunk(me, count).count) + scalar_bytes;
  for (size_t j = 0; j < g; ++j) {
    const Chunk c = chunk(j, count);
    const size_t encoded = codec.encoded_bytes(c.count);
    // Our own chunk is encoded too: every contribution is rounded alike.
    out_[j].resize(encoded + scalar_bytes);
    encode(codec, payload + c.begin, c.count, out_[j].data(), mix(stream, me, j));
    if (scalar_bytes > 0) std::memcpy(out_[j].data() + encoded, scalars, scalar_bytes);
    if (j == me) continue;
    in_[j].resize(mine);
    recvs.push_back({static_cast<int>(j), in_[j].data(), mine});
    sends.push_back({static_cast<int>(j), out_[j].data(), out_[j].size()});
    sent_ += static_cast<int64_t>(out_[j].size());
  }
  peers_->exchange(sends, recvs, kScatterTag);
  in_[me] = out_[me];
}

void CompressedAllreduce::gather(float* payload, size_t count, const WireCodec& codec,
                                 uint64_t stream) {
  const auto g = static_cast<size_t>(peers_->size());
  const auto me = static_cast<size_t>(peers_->rank());
  const Chunk own = chunk(me, count);
  std::vector<std::byte>& sum_bytes = out_[me];
  sum_bytes.resize(codec.encoded_bytes(own.count));
  encode(codec, sum_.data(), own.count, sum_bytes.data(), mix(stream, g, me));
  std::vector<PeerExchange::Send> sends;
  std::vector<PeerExchange::Recv> recvs;
  for (size_t j = 0; j < g; ++j) {
    if (j == me) continue;
    in_[j].resize(codec.encoded_bytes(chunk(j, count).count));
    recvs.push_back({static_cast<int>(j), in_[j].data(), in_[j].size()});
    sends.push_back({static_cast<int>(j), sum_bytes.data(), sum_bytes.size()});
    sent_ += static_cast<int64_t>(sum_bytes.size());
  }
  peers_->exchange(sends, recvs, kGatherTag);
  for (size_t j = 0; j < g; ++j) {
    const Chunk c = chunk(j, count);
    decode(codec, (j == me ? sum_bytes : in_[j]).data(), c.count, payload + c.begin);
  }
}

void CompressedAllreduce::keep_residual(const float* payload, size_t count, const WireCodec& codec,
                                        float* residual) {
  for (size_t j = 0; j < static_cast<size_t>(peers_->size()); ++j) {
    const Chunk c = chunk(j, count);
    decode(codec, out_[j].data(), c.count, residual + c.begin);
    for (size_t i = c.begin; i < c.begin + c.count; ++i)
      residual[i] = payload[i] - residual[i];
  }
}

LinkTraffic CompressedAllreduce::run(float* payload, size_t count, const WireCodec& codec,
                                     double* scalars, size_t k, uint64_t stream, float* residual) {
  if (peers_->size() <= 1) return {};
  sent_ = 0;
  scatter(payload, count, codec, scalars, k, stream);
  if (residual != nullptr) keep_residual(payload, count, codec, residual);
  // Every rank sums the G contributions of its chunk, and all the scalars, in rank order.
  const Chunk own = chunk(static_cast<size_t>(peers_->rank()), count);
  const size_t encoded = codec.encoded_bytes(own.count);
  sum_.assign(own.count, 0.0F);
  std::vector<double> total(k, 0.0);
  for (const auto& message : in_) {
    decode_add(codec, message.data(), own.count, sum_.data());
    for (size_t i = 0; i < k; ++i) {
      double v = 0.0;
      std::memcpy(&v, message.data() + encoded + i * sizeof(double), sizeof(v));
      total[i] += v;
    }
  }
  std::copy(total.begin(), total.end(), scalars);
  gather(payload, count, codec, stream);
  LinkTraffic t = traffic(count, codec, k);
  t.sent_bytes = sent_;
  return t;
}

}  // namespace autoloco
