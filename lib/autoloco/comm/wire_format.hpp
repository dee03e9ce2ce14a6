// How pseudo-gradients travel on the inter-dc wire (outer.wire_dtype, ALGORITHMS.md §4,
// docs/methods.md "Compressed pseudo-gradients"):
//   fp32, bf16        one value per 4 or 2 bytes, no scales
//   fp8               e4m3 (4 exponent bits, bias 7, 3 mantissa bits; largest 448, no
//                     infinities), one byte a value
//   int8, int4        symmetric integers in [-127, 127] and [-7, 7]
//   int2              symmetric integers in [-1, 1] (ternary: the fourth code is unused), four
//                     to a byte; SparseLoCo's 2-bit values (arXiv 2508.15706)
//   e3m0              4 bits: sign and a 3-bit exponent, no mantissa: 0 and ±2^(e-7) for
//                     e = 1..7 (Streaming DiLoCo's 4-bit format, arXiv 2501.18512)
// The block formats (fp8, int8, int4, int2, e3m0) carry one fp32 scale per block of `block`
// values: the block's largest magnitude over the format's largest value. An encoded chunk is its
// scales (fp32, one per block) followed by its values (the 4-bit ones two to a byte, low
// nibble first; the 2-bit ones four to a byte, lowest bits first). Rounding is to nearest (ties to
// even for bf16, fp8 and the integers; away from zero for e3m0), or stochastic: up with the
// probability of the distance to the value below, from a counter-based hash of (stream, index), so
// that a run stays deterministic. A block holding an infinity or NaN gets a NaN scale: it decodes
// to NaN, never to a number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace autoloco {

enum class WireFormat { fp32, bf16, fp8, int8, int4, int2, e3m0 };

struct WireCodec {
  WireFormat format = WireFormat::fp32;
  size_t block = 256;       // values per fp32 scale (block formats)
  bool stochastic = false;  // stochastic rounding (block formats)
  // SparseLoCo's sparse wire (sparse_codec.hpp): the fraction of each chunk of `topk_chunk`
  // values sent, in `format`; 0 sends every value. Its messages are all-gathered, not summed
  // on the way (sparse_allgather.hpp).
  double topk = 0.0;
  size_t topk_chunk = 4096;

  bool sparse() const { return topk > 0.0; }

  bool has_scales() const;
  // The largest magnitude a code stands for, in units of the block's scale (448 for fp8, 127,
  // 7 and 1 for the integers, 1 for e3m0; 0 for fp32 and bf16, which have no scales).
  float largest() const;
  int bits() const;  // bits of one value
  // Bytes of `count` encoded values: their scales and their values (and indices when sparse).
  size_t encoded_bytes(size_t count) const;
  // The largest error of a decoded value v of a block whose scale is `scale`, for the tests and
  // docs/methods.md.
  double error_bound(double v, double scale) const;
  std::string describe() const;  // e.g. "int4, blocks of 256 with an fp32 scale, nearest"
};

// "fp32", "bf16", "fp8", "int8", "int4", "int2", "e3m0"; throws ConfigError naming
// outer.wire_dtype.
WireFormat parse_wire_format(const std::string& name);
std::string wire_format_name(WireFormat format);

// Encodes `count` values into codec.encoded_bytes(count) bytes at `out`. `stream` seeds the
// stochastic rounding (unused when rounding to nearest).
void encode(const WireCodec& codec, const float* values, size_t count, std::byte* out,
            uint64_t stream = 0);
// Decodes `count` values written by encode.
void decode(const WireCodec& codec, const std::byte* in, size_t count, float* values);
// Adds the decoded values to `sum` (the fp32 reduction of the compressed all-reduce).
void decode_add(const WireCodec& codec, const std::byte* in, size_t count, float* sum);

// The `stream` of encode for a run's seed and a counter that no two all-reduces of the run
// share (round and fragment, or step): stochastic rounding draws afresh each time, alike on
// every rank.
uint64_t rounding_stream(uint64_t seed, uint64_t counter);
// The stream of piece `piece` of an all-reduce whose stream is `stream`, for a message sent in
// pieces (HierarchicalAllreduce, shards over 1 GiB): piece 0 keeps the all-reduce's stream (a
// message of one piece draws what it always drew), later pieces a hash of both. Counting pieces
// on from the stream instead would hand piece j of round k the stream of round k + j · piece
// / 2^16, whose noise would repeat.
uint64_t piece_stream(uint64_t stream, uint64_t piece);

// The e4m3 byte nearest to x (|x| ≤ 448, finite), and its value.
uint8_t float_to_e4m3(float x);
float e4m3_to_float(uint8_t code);

}  // namespace autoloco
