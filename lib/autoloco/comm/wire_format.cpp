#include "autoloco/comm/wire_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autoloco/comm/packed_message.hpp"
#include "autoloco/comm/sparse_codec.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/splitmix.hpp"

namespace autoloco {
namespace {

uint32_t bits_of(float x) {
  uint32_t b = 0;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// Round to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves no fraction bits.
float round_even(float x) {
  constexpr float kMagic = 12582912.0F;
  return (x + kMagic) - kMagic;
}

// 32 uniform bits for value `index` of a stream.
uint32_t noise(uint64_t stream, uint64_t index) {
  return static_cast<uint32_t>(splitmix64_at(stream, index) >> 32);
}

// A uniform float in [0, 1) from 24 of the bits.
float uniform(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-24F;
}

// The largest value a code of the format stands for, in units of the block's scale.
float code_max(WireFormat f) {
  switch (f) {
    case WireFormat::fp8:
      return 448.0F;
    case WireFormat::int8:
      return 127.0F;
    case WireFormat::int4:
      return 7.0F;
    case WireFormat::int2:
      return 1.0F;
    case WireFormat::e3m0:
      return 1.0F;
    default:
      return 1.0F;
  }
}

// The block's scale: its largest magnitude over code_max; NaN if it holds an infinity or NaN,
// 0 for a block of zeros (or of magnitudes so small that the scale underflows).
float block_scale(const float* v, size_t n, float max_code) {
  float absmax = 0.0F;
  int bad = 0;  // an integer reduction, so that the loop vectorises without -ffast-math
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(v[i]);
    absmax = a > absmax ? a : absmax;
    bad |= !(a <= std::numeric_limits<float>::max()) ? 1 : 0;  // an infinity or NaN
  }
  if (bad != 0) return std::numeric_limits<float>::quiet_NaN();
  return absmax / max_code;
}

float clamp_abs(float x, float limit) {
  return x < -limit ? -limit : (x > limit ? limit : x);
}

float float_of(uint32_t b) {
  float x = 0.0F;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}

// Rounding to nearest, written without branches or calls so that the block loops vectorise.
uint8_t e4m3_nearest(float x) {
  const uint32_t sign = (bits_of(x) >> 24) & 0x80U;
  const float m = std::fabs(x);
  const float a = m > 448.0F ? 448.0F : m;  // not std::fmin: a call the loop cannot vectorise
  // Through int32: SSE has no vector conversion of floats to unsigned integers.
  const auto subnormal =
      static_cast<uint32_t>(static_cast<int32_t>(round_even(a * 512.0F)));  // 8 is 2^-6: 0x08
  const uint32_t b = bits_of(a);
  const uint32_t rounded = (b + 0x7FFFFU + ((b >> 20) & 1U)) >> 20;
  const uint32_t normal = std::min<uint32_t>(rounded - ((127U - 7U) << 3), 0x7EU);
  return static_cast<uint8_t>(sign | (a < 0x1p-6F ? subnormal : normal));
}

uint8_t e3m0_nearest(float x) {
  const uint32_t sign = (bits_of(x) >> 28) & 0x8U;
  const float m = std::fabs(x);
  const float a = m > 1.0F ? 1.0F : m;
  const uint32_t b = bits_of(a);
  const uint32_t up = (b & 0x7FFFFFU) >= 0x400000U ? 1U : 0U;
  const uint32_t normal = std::min<uint32_t>((b >> 23) - 120U + up, 7U);
  const uint32_t small = a >= 0x1p-7F ? 1U : 0U;
  const uint32_t e = a < 0x1p-6F ? small : normal;
  return static_cast<uint8_t>(e == 0 ? 0U : sign | e);
}

// The values of e4m3 and e3m0 codes from their bits.
float e4m3_value(uint8_t code) {
  const uint32_t c = code;
  const uint32_t e = (c >> 3) & 15U;
  const uint32_t m = c & 7U;
  const float magnitude =
      e == 0 ? static_cast<float>(m) * 0x1p-9F : float_of(((e + 120U) << 23) | (m << 20));
  const float v = (c & 0x80U) != 0 ? -magnitude : magnitude;
  return (c & 0x7FU) == 0x7FU ? std::numeric_limits<float>::quiet_NaN() : v;
}

// fp8 decodes by table: a lookup is faster than the bit arithmetic with its three selects.
const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (size_t c = 0; c < t.size(); ++c)
      t[c] = e4m3_value(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

float e3m0_value(uint8_t nibble) {
  const uint32_t e = nibble & 7U;
  const float magnitude = e == 0 ? 0.0F : float_of((e + 120U) << 23);
  return (nibble & 8U) != 0 ? -magnitude : magnitude;
}

// Stochastic rounding: up with the probability of the distance to the code below (the random
// bits stand in for the bits that rounding drops).
uint8_t e4m3_stochastic(float x, uint32_t random) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fmin(std::fabs(x), 448.0F);
  if (a < 0x1p-6F) {  // subnormal: multiples of 2^-9 (8 of them are 2^-6, code 0x08)
    return static_cast<uint8_t>(sign |
                                static_cast<uint8_t>(std::floor(a * 512.0F + uniform(random))));
  }
  const uint32_t b = bits_of(a);
  const uint32_t rounded = (b + (random & 0xFFFFFU)) >> 20;  // exponent and 3 mantissa bits
  const uint32_t code = std::min<uint32_t>(rounded - ((127U - 7U) << 3), 0x7EU);
  return static_cast<uint8_t>(sign | code);
}

// e3m0: 0, or 2^(e-7) for e = 1..7; the code below a is 2^floor(log2 a).
uint8_t e3m0_stochastic(float x, uint32_t random) {
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fmin(std::fabs(x), 1.0F);
  if (a < 0x1p-6F) {  // between 0 and 2^-6
    return static_cast<uint8_t>(uniform(random) < a * 64.0F ? sign | 1U : 0U);
  }
  const uint32_t b = bits_of(a);
  const bool up = (random >> 9) < (b & 0x7FFFFFU);
  const uint32_t e = std::min<uint32_t>((b >> 23) - 127U + 7U + (up ? 1U : 0U), 7U);
  return static_cast<uint8_t>(sign | e);
}

// Codes of one block (values already divided by the scale), one byte each; the 4-bit formats
// are packed afterwards. Rounding to nearest runs in loops that vectorise; stochastic rounding
// draws a hash per value.
void block_codes(const WireCodec& c, const float* x, size_t n, uint8_t* codes, uint64_t stream,
                 size_t first) {
  const bool sr = c.stochastic;
  switch (c.format) {
    case WireFormat::int8:
    case WireFormat::int4:
    case WireFormat::int2: {
      const float q_max = code_max(c.format);
      if (sr) {
        for (size_t i = 0; i < n; ++i) {
          const float q = clamp_abs(std::floor(x[i] + uniform(noise(stream, first + i))), q_max);
          codes[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
        }
      } else {
        for (size_t i = 0; i < n; ++i)
          codes[i] = static_cast<uint8_t>(static_cast<int8_t>(clamp_abs(round_even(x[i]), q_max)));
      }
      break;
    }
    case WireFormat::fp8:
      if (sr) {
        for (size_t i = 0; i < n; ++i)
          codes[i] = e4m3_stochastic(x[i], noise(stream, first + i));
      } else {
        for (size_t i = 0; i < n; ++i)
          codes[i] = e4m3_nearest(x[i]);
      }
      break;
    case WireFormat::e3m0:
      if (sr) {
        for (size_t i = 0; i < n; ++i)
          codes[i] = e3m0_stochastic(x[i], noise(stream, first + i));
      } else {
        for (size_t i = 0; i < n; ++i)
          codes[i] = e3m0_nearest(x[i]);
      }
      break;
    default:
      throw CommError("internal: block_codes on a format without scales");
  }
}

float int4_value(uint8_t nibble) {  // sign-extend the 4 bits
  return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(nibble << 4)) >> 4);
}

float int2_value(uint8_t code) {  // sign-extend the 2 bits
  return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(code << 6)) >> 6);
}

// The n values of a 2-bit block, four to a byte, lowest bits first.
void decode_crumbs(const uint8_t* v, size_t n, float scale, float* out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = int2_value(static_cast<uint8_t>((v[i / 4] >> (2 * (i % 4))) & 3U)) * scale;
}

// The n values of one block (its first byte at `v`; blocks start on a whole byte, the block
// size being even) times the block's scale.
// The n values of a 4-bit block, two to a byte, low nibble first.
template <typename Value>
void decode_nibbles(const uint8_t* v, size_t n, float scale, float* out, Value value) {
  const size_t pairs = n / 2;
  for (size_t j = 0; j < pairs; ++j) {
    out[2 * j] = value(static_cast<uint8_t>(v[j] & 0xF)) * scale;
    out[2 * j + 1] = value(static_cast<uint8_t>(v[j] >> 4)) * scale;
  }
  if (n % 2 != 0) out[n - 1] = value(static_cast<uint8_t>(v[pairs] & 0xF)) * scale;
}

void decode_block(WireFormat f, const uint8_t* v, size_t n, float scale, float* out) {
  switch (f) {
    case WireFormat::int8:
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(static_cast<int8_t>(v[i])) * scale;
      break;
    case WireFormat::fp8: {
      const auto& table = e4m3_table();
      for (size_t i = 0; i < n; ++i)
        out[i] = table[v[i]] * scale;
      break;
    }
    case WireFormat::int4:
      decode_nibbles(v, n, scale, out, int4_value);
      break;
    case WireFormat::int2:
      decode_crumbs(v, n, scale, out);
      break;
    default:
      decode_nibbles(v, n, scale, out, e3m0_value);
      break;
  }
}

// Four 2-bit codes to a byte, lowest bits first; a last partial byte's high bits are zero.
void pack_crumbs(const uint8_t* codes, size_t n, uint8_t* packed) {
  for (size_t j = 0; j < (n + 3) / 4; ++j) {
    uint8_t byte = 0;
    for (size_t i = 4 * j; i < std::min(n, 4 * j + 4); ++i)
      byte = static_cast<uint8_t>(byte | ((codes[i] & 3U) << (2 * (i % 4))));
    packed[j] = byte;
  }
}

size_t block_count(size_t count, size_t block) {
  return (count + block - 1) / block;
}

// Decodes a block-format chunk block by block, handing each block's values to sink(begin, n,
// values).
template <typename Sink>
void decode_blocks(const WireCodec& c, const std::byte* in, size_t count, Sink sink) {
  const size_t blocks = block_count(count, c.block);
  const auto* values = reinterpret_cast<const uint8_t*>(in + 4 * blocks);
  const auto bits = static_cast<size_t>(c.bits());
  std::vector<float> block(std::min(count, c.block));
  for (size_t b = 0; b < blocks; ++b) {
    float scale = 0.0F;
    std::memcpy(&scale, in + 4 * b, sizeof(scale));
    const size_t begin = b * c.block;
    const size_t n = std::min(count, begin + c.block) - begin;
    // Blocks start on a whole byte: outer.wire_block is a multiple of 8 / bits.
    decode_block(c.format, values + begin * bits / 8, n, scale, block.data());
    sink(begin, n, block.data());
  }
}

}  // namespace

float WireCodec::largest() const {
  return has_scales() ? code_max(format) : 0.0F;
}

bool WireCodec::has_scales() const {
  return format != WireFormat::fp32 && format != WireFormat::bf16;
}

int WireCodec::bits() const {
  switch (format) {
    case WireFormat::fp32:
      return 32;
    case WireFormat::bf16:
      return 16;
    case WireFormat::fp8:
    case WireFormat::int8:
      return 8;
    case WireFormat::int2:
      return 2;
    default:
      return 4;
  }
}

size_t WireCodec::encoded_bytes(size_t count) const {
  if (sparse()) return sparse_codec(*this).encoded_bytes(count);
  const size_t value_bytes = (count * static_cast<size_t>(bits()) + 7) / 8;
  return has_scales() ? 4 * block_count(count, block) + value_bytes : value_bytes;
}

double WireCodec::error_bound(double v, double scale) const {
  const double a = std::fabs(v);
  const double fp = a * 0x1p-20;  // the division by the scale and the product with it
  // Stochastic rounding can land on either neighbour: up to a whole step instead of half.
  const double steps = has_scales() && stochastic ? 2.0 : 1.0;
  switch (format) {
    case WireFormat::fp32:
      return 0.0;
    case WireFormat::bf16:
      return std::max(a * 0x1p-8, 0x1p-134);  // bf16 denormals are multiples of 2^-133
    case WireFormat::fp8:
      return steps * std::max(a * 0x1p-4, scale * 0x1p-10) + fp;
    case WireFormat::int8:
    case WireFormat::int4:
    case WireFormat::int2:
      return steps * scale / 2 + fp;
    case WireFormat::e3m0:  // the step above 2^k is 2^k: up to |v| when rounding stochastically
      return (stochastic ? std::max(a, scale * 0x1p-6) : std::max(a / 3, scale * 0x1p-7)) + fp;
  }
  return 0.0;
}

std::string WireCodec::describe() const {
  if (sparse()) return sparse_codec(*this).describe();
  if (!has_scales()) return wire_format_name(format);
  return fmt::format("{}, blocks of {} values with an fp32 scale, {} rounding",
                     wire_format_name(format), block, stochastic ? "stochastic" : "nearest");
}

WireFormat parse_wire_format(const std::string& name) {
  for (WireFormat f : {WireFormat::fp32, WireFormat::bf16, WireFormat::fp8, WireFormat::int8,
                       WireFormat::int4, WireFormat::int2, WireFormat::e3m0}) {
    if (wire_format_name(f) == name) return f;
  }
  throw ConfigError(
      fmt::format("config key outer.wire_dtype: unknown format '{}': use fp32, "
                  "bf16, fp8, int8, int4, int2 or e3m0",
                  name));
}

std::string wire_format_name(WireFormat format) {
  switch (format) {
    case WireFormat::fp32:
      return "fp32";
    case WireFormat::bf16:
      return "bf16";
    case WireFormat::fp8:
      return "fp8";
    case WireFormat::int8:
      return "int8";
    case WireFormat::int4:
      return "int4";
    case WireFormat::int2:
      return "int2";
    case WireFormat::e3m0:
      return "e3m0";
  }
  return "?";
}

uint64_t rounding_stream(uint64_t seed, uint64_t counter) {
  return seed * kSplitmixGamma + counter;
}

uint64_t piece_stream(uint64_t stream, uint64_t piece) {
  return piece == 0 ? stream : splitmix64_mix(stream ^ splitmix64_mix(piece));
}

uint8_t float_to_e4m3(float x) {
  return e4m3_nearest(x);
}
float e4m3_to_float(uint8_t code) {
  return e4m3_value(code);
}

void encode(const WireCodec& c, const float* values, size_t count, std::byte* out,
            uint64_t stream) {
  if (c.format == WireFormat::fp32) {
    std::memcpy(out, values, count * sizeof(float));
    return;
  }
  if (c.format == WireFormat::bf16) {
    for (size_t i = 0; i < count; ++i) {
      const uint16_t h = float_to_bf16(values[i]);
      std::memcpy(out + 2 * i, &h, sizeof(h));
    }
    return;
  }
  const size_t blocks = block_count(count, c.block);
  std::byte* value_out = out + 4 * blocks;
  const auto bits = static_cast<size_t>(c.bits());
  std::vector<float> scaled(std::min(count, c.block));
  std::vector<uint8_t> codes(scaled.size());
  const float max_code = code_max(c.format);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * c.block;
    const size_t n = std::min(count, begin + c.block) - begin;
    float scale = block_scale(values + begin, n, max_code);
    // A block whose scale underflowed or is not a number encodes zeros; the NaN scale stays.
    const bool usable = std::isfinite(scale) && scale > 0.0F;
    for (size_t i = 0; i < n; ++i)
      scaled[i] = usable ? values[begin + i] / scale : 0.0F;
    block_codes(c, scaled.data(), n, codes.data(), stream, begin);
    std::memcpy(out + 4 * b, &scale, sizeof(scale));
    auto* packed = reinterpret_cast<uint8_t*>(value_out + begin * bits / 8);
    if (bits == 8) {
      std::memcpy(packed, codes.data(), n);
    } else if (bits == 4) {
      for (size_t j = 0; j < n / 2; ++j)
        packed[j] = static_cast<uint8_t>((codes[2 * j] & 0xF) | (codes[2 * j + 1] << 4));
      if (n % 2 != 0) packed[n / 2] = static_cast<uint8_t>(codes[n - 1] & 0xF);
    } else {
      pack_crumbs(codes.data(), n, packed);
    }
  }
}

void decode(const WireCodec& c, const std::byte* in, size_t count, float* values) {
  if (c.format == WireFormat::fp32) {
    std::memcpy(values, in, count * sizeof(float));
  } else if (c.format == WireFormat::bf16) {
    for (size_t i = 0; i < count; ++i) {
      uint16_t h = 0;
      std::memcpy(&h, in + 2 * i, sizeof(h));
      values[i] = bf16_to_float(h);
    }
  } else {
    decode_blocks(c, in, count, [values](size_t begin, size_t n, const float* block) {
      std::copy(block, block + n, values + begin);
    });
  }
}

void decode_add(const WireCodec& c, const std::byte* in, size_t count, float* sum) {
  if (!c.has_scales()) {
    std::vector<float> values(count);
    decode(c, in, count, values.data());
    for (size_t i = 0; i < count; ++i)
      sum[i] += values[i];
    return;
  }
  decode_blocks(c, in, count, [sum](size_t begin, size_t n, const float* block) {
    for (size_t i = 0; i < n; ++i)
      sum[begin + i] += block[i];
  });
}

}  // namespace autoloco
