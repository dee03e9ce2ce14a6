// The inter-dc wire formats: exact sizes, known codes, round trips within each format's error
// bound (zeros, denormals, infinities and NaN included), stochastic rounding and its streams.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "autoloco/comm/wire_format.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

const std::vector<WireFormat> kAll = {WireFormat::fp32, WireFormat::bf16, WireFormat::fp8,
                                      WireFormat::int8, WireFormat::int4, WireFormat::int2,
                                      WireFormat::e3m0};
const std::vector<WireFormat> kBlock = {WireFormat::fp8, WireFormat::int8, WireFormat::int4,
                                        WireFormat::int2, WireFormat::e3m0};

std::vector<float> round_trip(const WireCodec& c, const std::vector<float>& v,
                              uint64_t stream = 0) {
  std::vector<std::byte> wire(c.encoded_bytes(v.size()));
  encode(c, v.data(), v.size(), wire.data(), stream);
  std::vector<float> out(v.size());
  decode(c, wire.data(), v.size(), out.data());
  return out;
}

// Values over twelve orders of magnitude, both signs, some exact zeros and fp32 denormals.
std::vector<float> wide_values(size_t n) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::uniform_int_distribution<int> exponent(-30, 10);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::ldexp(normal(gen), exponent(gen));
  v[3] = 0.0F;
  v[4] = -0.0F;
  v[5] = std::numeric_limits<float>::denorm_min();
  v[6] = -3.0e-40F;
  return v;
}

// The scale of the block holding value i: its largest magnitude over the format's largest code.
double scale_of(const WireCodec& c, const std::vector<float>& v, size_t i) {
  const double max_code = c.largest();
  const size_t begin = i / c.block * c.block;
  double absmax = 0;
  for (size_t j = begin; j < std::min(v.size(), begin + c.block); ++j)
    absmax = std::max(absmax, static_cast<double>(std::fabs(v[j])));
  return absmax / max_code;
}

}  // namespace

TEST_CASE("wire formats: encoded bytes are the scales plus the packed values", "[wire]") {
  CHECK(WireCodec{WireFormat::fp32}.encoded_bytes(1000) == 4000);
  CHECK(WireCodec{WireFormat::bf16}.encoded_bytes(1001) == 2002);
  CHECK(WireCodec{WireFormat::fp8, 256}.encoded_bytes(1000) == 4 * 4 + 1000);
  CHECK(WireCodec{WireFormat::int8, 100}.encoded_bytes(1000) == 4 * 10 + 1000);
  CHECK(WireCodec{WireFormat::int4, 256}.encoded_bytes(1000) == 4 * 4 + 500);
  CHECK(WireCodec{WireFormat::e3m0, 256}.encoded_bytes(1001) == 4 * 4 + 501);
  CHECK(WireCodec{WireFormat::int4, 256}.encoded_bytes(0) == 0);
  CHECK(WireCodec{WireFormat::int2, 256}.encoded_bytes(1000) == 4 * 4 + 250);
  CHECK(WireCodec{WireFormat::int2, 256}.encoded_bytes(1001) == 4 * 4 + 251);
}

TEST_CASE(
    "wire formats: int2 codes are -1, 0 and 1 of the block's largest magnitude, four to a "
    "byte",
    "[wire]") {
  const WireCodec c{WireFormat::int2, 8};
  CHECK(c.bits() == 2);
  CHECK(c.largest() == 1.0F);
  // Block 1 (8 values): absmax 2; block 2 (the last 3 values): absmax 0.5.
  const std::vector<float> v = {2.0F,  -2.0F, 0.9F, 1.1F,  -1.1F, 0.0F,
                                -0.2F, 1.0F,  0.5F, -0.3F, 0.2F};
  std::vector<std::byte> wire(c.encoded_bytes(v.size()));
  REQUIRE(wire.size() == 2 * 4 + 3);
  encode(c, v.data(), v.size(), wire.data());
  // Codes 1, -1 (0b11), 0, 1 | -1, 0, 0, 0 (1.0 / 2 = 0.5 ties to even 0) | 1, -1 (-0.6), 0
  CHECK(static_cast<uint8_t>(wire[8]) == (0b01U | 0b11U << 2 | 0b00U << 4 | 0b01U << 6));
  CHECK(static_cast<uint8_t>(wire[9]) == 0b11U);
  CHECK(static_cast<uint8_t>(wire[10]) == (0b01U | 0b11U << 2));
  const std::vector<float> out = round_trip(c, v);
  CHECK(out ==
        std::vector<float>{2.0F, -2.0F, 0.0F, 2.0F, -2.0F, 0.0F, 0.0F, 0.0F, 0.5F, -0.5F, 0.0F});
}

TEST_CASE("wire formats: e4m3 codes of known values, and every finite code round trips", "[wire]") {
  CHECK(float_to_e4m3(0.0F) == 0x00);
  CHECK(float_to_e4m3(1.0F) == 0x38);
  CHECK(float_to_e4m3(-1.0F) == 0xB8);
  CHECK(float_to_e4m3(448.0F) == 0x7E);
  CHECK(float_to_e4m3(0x1p-6F) == 0x08);  // smallest normal
  CHECK(float_to_e4m3(0x1p-9F) == 0x01);  // smallest subnormal
  CHECK(float_to_e4m3(1.0625F) == 0x38);  // halfway between 1 and 1.125: ties to even
  CHECK(float_to_e4m3(1.1875F) == 0x3A);  // halfway between 1.125 and 1.25: to 1.25
  CHECK(e4m3_to_float(0x7E) == 448.0F);
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    const float v = e4m3_to_float(static_cast<uint8_t>(code));
    CHECK(float_to_e4m3(v) == code);
  }
}

TEST_CASE("wire formats: every format round trips within its error bound", "[wire]") {
  const std::vector<float> v = wide_values(3000);
  for (WireFormat f : kAll) {
    for (size_t block : {size_t{32}, size_t{256}}) {
      const WireCodec c{f, block};
      INFO(c.describe());
      const std::vector<float> out = round_trip(c, v);
      for (size_t i = 0; i < v.size(); ++i) {
        INFO("value " << i << ": " << v[i] << " decoded " << out[i]);
        const double bound = c.error_bound(v[i], c.has_scales() ? scale_of(c, v, i) : 0.0);
        CHECK(std::fabs(static_cast<double>(out[i]) - static_cast<double>(v[i])) <= bound + 1e-45);
      }
    }
  }
}

TEST_CASE("wire formats: zeros stay zeros and a block of denormals decodes within its bound",
          "[wire]") {
  for (WireFormat f : kBlock) {
    const WireCodec c{f, 64};
    INFO(c.describe());
    const std::vector<float> zeros(100, 0.0F);
    CHECK(round_trip(c, zeros) == zeros);
    std::vector<float> tiny(64, 0.0F);
    for (size_t i = 0; i < tiny.size(); ++i)
      tiny[i] = std::ldexp(static_cast<float>(i % 7) - 3.0F, -140);  // fp32 denormals
    const std::vector<float> out = round_trip(c, tiny);
    for (size_t i = 0; i < tiny.size(); ++i) {
      CHECK(std::isfinite(out[i]));
      CHECK(std::fabs(out[i] - tiny[i]) <= std::ldexp(4.0F, -140));
    }
  }
}

TEST_CASE("wire formats: a block holding an infinity or NaN decodes to NaN, the others not",
          "[wire]") {
  for (WireFormat f : kBlock) {
    for (float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()}) {
      const WireCodec c{f, 32};
      INFO(c.describe() << " with " << bad);
      std::vector<float> v(96, 0.5F);
      v[40] = bad;  // in block 1
      const std::vector<float> out = round_trip(c, v);
      for (size_t i = 0; i < v.size(); ++i) {
        INFO("value " << i);
        CHECK(std::isnan(out[i]) == (i >= 32 && i < 64));
      }
    }
  }
}

TEST_CASE("wire formats: stochastic rounding is seeded, unbiased and within its bound", "[wire]") {
  for (WireFormat f : kBlock) {
    const WireCodec c{f, 256, /*stochastic=*/true};
    INFO(c.describe());
    // Every block's scale is set by its 1.0; the other values sit between two codes.
    std::vector<float> v(256 * 40, 0.3F);
    for (size_t b = 0; b < v.size(); b += 256)
      v[b] = 1.0F;
    const std::vector<float> a = round_trip(c, v, 11);
    CHECK(round_trip(c, v, 11) == a);
    CHECK(round_trip(c, v, 12) != a);
    double sum = 0;
    double sq = 0;
    size_t n = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == 1.0F) continue;
      sum += static_cast<double>(a[i]);
      sq += (static_cast<double>(a[i]) - 0.3) * (static_cast<double>(a[i]) - 0.3);
      ++n;
      CHECK(static_cast<double>(std::fabs(a[i] - v[i])) <= c.error_bound(v[i], scale_of(c, v, i)));
    }
    // Unbiased: the mean within 5 standard errors (int2's codes are 1 apart: 0.3 rounds to 0 or
    // 1, a standard error of 0.0045 over these 10200 values).
    const double standard_error = std::sqrt(sq / static_cast<double>(n) / static_cast<double>(n));
    CHECK(sum / static_cast<double>(n) == Approx(0.3).margin(std::max(0.01, 5 * standard_error)));
  }
}

TEST_CASE("wire formats: every piece of every round draws its own rounding stream", "[wire]") {
  const uint64_t seed = 1234;
  // A message of one piece keeps the all-reduce's stream: what it drew before pieces had
  // streams of their own.
  for (const uint64_t counter : {0ULL, 1ULL, 0x10000ULL * 7 + 2})
    CHECK(piece_stream(rounding_stream(seed, counter), 0) == rounding_stream(seed, counter));
  // Pieces of 2^28 values (1 GiB of fp32): counted on from the stream, piece 1 of round r was
  // round r + 4096's piece 0 (OuterSync's counter is round · 2^16 + fragment).
  const uint64_t piece = uint64_t{1} << 28;
  const uint64_t r = 3;
  CHECK(rounding_stream(seed, r * 0x10000) + piece == rounding_stream(seed, (r + 4096) * 0x10000));
  CHECK(piece_stream(rounding_stream(seed, r * 0x10000), 1) !=
        rounding_stream(seed, (r + 4096) * 0x10000));
  // No two (round, fragment, piece) share a stream.
  std::set<uint64_t> streams;
  size_t count = 0;
  for (uint64_t round = 1; round <= 5000; ++round) {
    for (uint64_t fragment = 0; fragment < 3; ++fragment) {
      for (uint64_t p = 0; p < 3; ++p) {
        streams.insert(piece_stream(rounding_stream(seed, round * 0x10000 + fragment), p));
        ++count;
      }
    }
  }
  CHECK(streams.size() == count);
  // And two pieces of one round round the same values differently.
  const WireCodec c{WireFormat::int4, 256, /*stochastic=*/true};
  std::vector<float> v(4096, 0.3F);  // between two codes of the scale the 1.0s set
  for (size_t b = 0; b < v.size(); b += 256)
    v[b] = 1.0F;
  const uint64_t stream = rounding_stream(seed, r * 0x10000);
  CHECK(round_trip(c, v, piece_stream(stream, 0)) != round_trip(c, v, piece_stream(stream, 1)));
}

TEST_CASE("wire formats: decode_add sums into what is there", "[wire]") {
  const WireCodec c{WireFormat::int8, 32};
  const std::vector<float> v = wide_values(100);
  std::vector<std::byte> wire(c.encoded_bytes(v.size()));
  encode(c, v.data(), v.size(), wire.data());
  std::vector<float> decoded(v.size());
  decode(c, wire.data(), v.size(), decoded.data());
  std::vector<float> sum(v.size(), 1.0F);
  decode_add(c, wire.data(), v.size(), sum.data());
  for (size_t i = 0; i < v.size(); ++i)
    CHECK(sum[i] == 1.0F + decoded[i]);
}

TEST_CASE("wire formats: names parse, and an unknown one names the key", "[wire]") {
  for (WireFormat f : kAll)
    CHECK(parse_wire_format(wire_format_name(f)) == f);
  CHECK_THROWS_WITH(parse_wire_format("fp4"),
                    Catch::Contains("outer.wire_dtype") && Catch::Contains("e3m0"));
}
