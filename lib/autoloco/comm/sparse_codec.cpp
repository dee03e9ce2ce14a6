#include "autoloco/comm/sparse_codec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// The magnitude a value ranks by: an infinity or NaN above every number, so that a chunk that
// holds one sends it and decodes to NaN instead of hiding it in the residual.
float rank_of(float v) {
  const float a = std::fabs(v);
  return a <= std::numeric_limits<float>::max() ? a : std::numeric_limits<float>::infinity();
}

size_t index_bytes(size_t k, int bits) {
  return (k * static_cast<size_t>(bits) + 7) / 8;
}

// Calls sink(begin, n, encoded chunk) for each chunk of an encoding of `count` values.
template <typename Sink>
void for_each_chunk(const SparseCodec& c, const std::byte* in, size_t count, Sink sink) {
  size_t at = 0;
  for (size_t begin = 0; begin < count; begin += c.chunk) {
    const size_t n = std::min(c.chunk, count - begin);
    sink(begin, n, in + at);
    const size_t k = c.kept(n);
    at += c.values_codec(k).encoded_bytes(k) + index_bytes(k, c.index_bits());
  }
}

// The kept values of one encoded chunk and their indices.
void read_chunk(const SparseCodec& c, const std::byte* in, size_t n, std::vector<float>& values,
                std::vector<uint32_t>& indices) {
  const size_t k = c.kept(n);
  const WireCodec vc = c.values_codec(k);
  values.resize(k);
  indices.resize(k);
  decode(vc, in, k, values.data());
  unpack_indices(in + vc.encoded_bytes(k), k, c.index_bits(), indices.data());
  for (const uint32_t i : indices) {
    if (i >= n) {
      throw CommError(
          fmt::format("a sparse chunk of {} values names index {}: the message is damaged", n, i));
    }
  }
}

}  // namespace

SparseCodec sparse_codec(const WireCodec& codec) {
  return SparseCodec{codec.format, codec.topk_chunk, codec.topk, codec.stochastic};
}

size_t SparseCodec::kept(size_t n) const {
  if (n == 0) return 0;
  const auto k = static_cast<size_t>(std::ceil(density * static_cast<double>(n)));
  return std::clamp<size_t>(k, 1, n);
}

int SparseCodec::index_bits() const {
  int bits = 1;
  while ((size_t{1} << bits) < chunk)
    ++bits;
  return bits;
}

WireCodec SparseCodec::values_codec(size_t k) const {
  // One block, so one scale, for the chunk's kept values; it starts the chunk's encoding, on a
  // byte, whatever k is.
  return WireCodec{format, std::max<size_t>(k, 1), stochastic};
}

size_t SparseCodec::encoded_bytes(size_t count) const {
  size_t bytes = 0;
  for (size_t begin = 0; begin < count; begin += chunk) {
    const size_t k = kept(std::min(chunk, count - begin));
    bytes += values_codec(k).encoded_bytes(k) + index_bytes(k, index_bits());
  }
  return bytes;
}

std::string SparseCodec::describe() const {
  return fmt::format("top {:.3g}% of every {} values ({}-bit indices), the kept values in {}",
                     100.0 * density, chunk, index_bits(), values_codec(kept(chunk)).describe());
}

std::vector<uint32_t> top_k(const float* values, size_t n, size_t k) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0U);
  k = std::min(k, n);
  const auto before = [values](uint32_t a, uint32_t b) {
    const float ra = rank_of(values[a]);
    const float rb = rank_of(values[b]);
    return ra > rb || (ra == rb && a < b);
  };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                   before);
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void pack_indices(const uint32_t* indices, size_t count, int bits, std::byte* out) {
  const size_t bytes = index_bytes(count, bits);
  std::memset(out, 0, bytes);
  size_t bit = 0;
  for (size_t i = 0; i < count; ++i) {
    for (int b = 0; b < bits; ++b, ++bit) {
      if (((indices[i] >> b) & 1U) != 0) out[bit / 8] |= static_cast<std::byte>(1U << (bit % 8));
    }
  }
}

void unpack_indices(const std::byte* in, size_t count, int bits, uint32_t* indices) {
  size_t bit = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t v = 0;
    for (int b = 0; b < bits; ++b, ++bit) {
      if ((static_cast<unsigned>(in[bit / 8]) >> (bit % 8) & 1U) != 0) v |= 1U << b;
    }
    indices[i] = v;
  }
}

void encode_sparse(const SparseCodec& c, const float* values, size_t count, std::byte* out,
                   uint64_t stream) {
  std::vector<float> kept_values;
  size_t at = 0;
  for (size_t begin = 0; begin < count; begin += c.chunk) {
    const size_t n = std::min(c.chunk, count - begin);
    const size_t k = c.kept(n);
    const std::vector<uint32_t> indices = top_k(values + begin, n, k);
    kept_values.resize(k);
    for (size_t j = 0; j < k; ++j)
      kept_values[j] = values[begin + indices[j]];
    const WireCodec vc = c.values_codec(k);
    // Each chunk draws its own rounding stream (its index as a piece of the message).
    encode(vc, kept_values.data(), k, out + at, piece_stream(stream, begin / c.chunk));
    at += vc.encoded_bytes(k);
    pack_indices(indices.data(), k, c.index_bits(), out + at);
    at += index_bytes(k, c.index_bits());
  }
}

void decode_sparse(const SparseCodec& c, const std::byte* in, size_t count, float* values) {
  std::fill(values, values + count, 0.0F);
  decode_add_sparse(c, in, count, values);
}

void decode_add_sparse(const SparseCodec& c, const std::byte* in, size_t count, float* sum) {
  std::vector<float> kept_values;
  std::vector<uint32_t> indices;
  for_each_chunk(c, in, count, [&](size_t begin, size_t n, const std::byte* chunk) {
    read_chunk(c, chunk, n, kept_values, indices);
    for (size_t j = 0; j < indices.size(); ++j)
      sum[begin + indices[j]] += kept_values[j];
  });
}

}  // namespace autoloco
