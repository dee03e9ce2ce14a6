// SparseLoCo's wire (Sarfi et al., arXiv 2508.15706; ALGORITHMS.md §5, docs/methods.md): a
// vector cut into chunks of `chunk` values, of which each sends only its k = ⌈density · n⌉
// largest magnitudes (n the chunk's length; ties go to the lower index, so every rank picks the
// same). An encoded chunk is its kept values in the wire format of `values` as one block (one
// fp32 scale per chunk for the block formats), then their indices within the chunk in ascending
// order, ⌈log2 chunk⌉ bits each, packed lowest bits first. Everything not kept decodes to zero:
// the sender keeps it in its error-feedback residual. A chunk holding an infinity or NaN keeps
// it (it ranks above every number) and its scale becomes NaN, as the dense formats do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "autoloco/comm/wire_format.hpp"

namespace autoloco {

struct SparseCodec {
  WireFormat format = WireFormat::int2;  // of the kept values
  size_t chunk = 4096;                   // values per chunk, 2 .. 2^24
  double density = 0.02;                 // fraction kept per chunk, (0, 1]
  bool stochastic = false;               // stochastic rounding of the kept values

  // Values kept of a chunk of n values (n ≤ chunk): ⌈density n⌉, at least 1 when n > 0.
  size_t kept(size_t n) const;
  // Bits of one index: ⌈log2 chunk⌉.
  int index_bits() const;
  // Bytes of `count` values encoded, exactly.
  size_t encoded_bytes(size_t count) const;
  // The dense codec of a chunk's kept values (one block of k values).
  WireCodec values_codec(size_t k) const;
  std::string describe() const;
};

// The sparse codec of a WireCodec with topk > 0 (outer.wire_topk).
SparseCodec sparse_codec(const WireCodec& codec);

// The kept positions of one chunk of n values: the k largest magnitudes, ties to the lower
// index, in ascending order.
std::vector<uint32_t> top_k(const float* values, size_t n, size_t k);

// `bits`-bit indices packed lowest bits first into ⌈count bits / 8⌉ bytes, and back.
void pack_indices(const uint32_t* indices, size_t count, int bits, std::byte* out);
void unpack_indices(const std::byte* in, size_t count, int bits, uint32_t* indices);

// Encodes `count` values into codec.encoded_bytes(count) bytes at `out`. `stream` seeds the
// stochastic rounding of the kept values (rounding_stream).
void encode_sparse(const SparseCodec& codec, const float* values, size_t count, std::byte* out,
                   uint64_t stream = 0);
// Decodes them: the kept values at their places, zeros elsewhere.
void decode_sparse(const SparseCodec& codec, const std::byte* in, size_t count, float* values);
// Adds the decoded values to `sum`, touching only the kept places.
void decode_add_sparse(const SparseCodec& codec, const std::byte* in, size_t count, float* sum);

}  // namespace autoloco
