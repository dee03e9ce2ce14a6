// SparseLoCo's wire (sparse_codec.hpp): the kept count and the exact bytes, top-k with ties to
// the lower index, index packing bit for bit, and round trips: kept values at their places and
// zeros elsewhere, so that what is sent plus what the sender keeps is what it had.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "autoloco/comm/sparse_codec.hpp"

using namespace autoloco;

namespace {

std::vector<float> normal_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> v(n);
  for (float& x : v)
    x = normal(gen);
  return v;
}

std::vector<float> round_trip(const SparseCodec& c, const std::vector<float>& v) {
  std::vector<std::byte> wire(c.encoded_bytes(v.size()));
  encode_sparse(c, v.data(), v.size(), wire.data());
  std::vector<float> out(v.size(), -1.0F);
  decode_sparse(c, wire.data(), v.size(), out.data());
  return out;
}

}  // namespace

TEST_CASE("sparse wire: kept values and exact bytes per chunk", "[wire][sparse]") {
  const SparseCodec c{WireFormat::int2, 4096, 0.02};
  CHECK(c.index_bits() == 12);
  CHECK(c.kept(4096) == 82);  // ⌈81.92⌉
  CHECK(c.kept(10) == 1);     // at least one
  CHECK(c.kept(0) == 0);
  // A whole chunk: a scale, 82 2-bit codes (21 bytes), 82 12-bit indices (123 bytes).
  CHECK(c.encoded_bytes(4096) == 4 + 21 + 123);
  // Two chunks, the second of 904 values: ⌈18.08⌉ = 19 kept.
  CHECK(c.encoded_bytes(5000) == 148 + 4 + 5 + 29);
  CHECK(SparseCodec{WireFormat::fp32, 4096, 0.02}.encoded_bytes(4096) == 82 * 4 + 123);
  CHECK(SparseCodec{WireFormat::int2, 4097, 0.02}.index_bits() == 13);
  CHECK(SparseCodec{WireFormat::int2, 2, 0.5}.index_bits() == 1);
}

TEST_CASE("sparse wire: top-k keeps the largest magnitudes with ties to the lower index",
          "[wire][sparse]") {
  const std::vector<float> v = {0.5F, -3.0F, 1.0F, 3.0F, -1.0F, 0.0F, 1.0F, -0.25F};
  CHECK(top_k(v.data(), v.size(), 2) == std::vector<uint32_t>{1, 3});
  CHECK(top_k(v.data(), v.size(), 3) == std::vector<uint32_t>{1, 2, 3});  // 1.0 at 2 before 4, 6
  CHECK(top_k(v.data(), v.size(), 4) == std::vector<uint32_t>{1, 2, 3, 4});
  CHECK(top_k(v.data(), v.size(), 0).empty());
  const std::vector<float> zeros(5, 0.0F);
  CHECK(top_k(zeros.data(), zeros.size(), 2) == std::vector<uint32_t>{0, 1});
  const std::vector<float> bad = {1.0F, std::numeric_limits<float>::quiet_NaN(), 2.0F};
  CHECK(top_k(bad.data(), bad.size(), 1) == std::vector<uint32_t>{1});
}

TEST_CASE("sparse wire: indices pack and unpack bit for bit at every width", "[wire][sparse]") {
  std::mt19937 gen(3);
  for (int bits = 1; bits <= 24; ++bits) {
    std::uniform_int_distribution<uint32_t> index(0, (1U << bits) - 1);
    std::vector<uint32_t> in(37);
    for (uint32_t& i : in)
      i = index(gen);
    std::vector<std::byte> packed((in.size() * static_cast<size_t>(bits) + 7) / 8);
    pack_indices(in.data(), in.size(), bits, packed.data());
    std::vector<uint32_t> out(in.size());
    unpack_indices(packed.data(), out.size(), bits, out.data());
    INFO(bits << " bits");
    CHECK(out == in);
  }
  // Lowest bits first: 3-bit indices 5 (101) and 6 (110) are the byte 0b110101.
  const std::vector<uint32_t> two = {5, 6};
  std::byte b{};
  pack_indices(two.data(), 2, 3, &b);
  CHECK(static_cast<unsigned>(b) == 0b110101U);
}

TEST_CASE("sparse wire: fp32 values round trip exactly at the kept places and zero elsewhere",
          "[wire][sparse]") {
  const SparseCodec c{WireFormat::fp32, 64, 0.1};
  const std::vector<float> v = normal_values(1000, 11);  // 15 chunks of 64 and one of 40
  const std::vector<float> out = round_trip(c, v);
  size_t kept = 0;
  for (size_t begin = 0; begin < v.size(); begin += c.chunk) {
    const size_t n = std::min(c.chunk, v.size() - begin);
    const std::vector<uint32_t> expected = top_k(v.data() + begin, n, c.kept(n));
    for (size_t i = 0; i < n; ++i) {
      const bool is_kept =
          std::find(expected.begin(), expected.end(), static_cast<uint32_t>(i)) != expected.end();
      INFO("value " << begin + i);
      CHECK(out[begin + i] == (is_kept ? v[begin + i] : 0.0F));
      kept += is_kept ? 1 : 0;
    }
  }
  CHECK(kept == 15 * 7 + 4);
}

TEST_CASE("sparse wire: int2 keeps the sign and the chunk's scale, and decode_add adds in place",
          "[wire][sparse]") {
  const SparseCodec c{WireFormat::int2, 8, 0.25};
  // Chunk 1 keeps -4 and 3 (scale 4: 3 / 4 rounds to 1); chunk 2 keeps 0.5 and -0.2 (-0.4 -> 0).
  const std::vector<float> v = {1.0F, -4.0F, 0.0F,  3.0F, 0.1F, 0.0F, 0.0F, 0.0F,
                                0.5F, 0.0F,  -0.2F, 0.1F, 0.0F, 0.0F, 0.0F, 0.0F};
  const std::vector<float> out = round_trip(c, v);
  std::vector<float> expected(16, 0.0F);
  expected[1] = -4.0F;
  expected[3] = 4.0F;
  expected[8] = 0.5F;
  CHECK(out == expected);
  std::vector<std::byte> wire(c.encoded_bytes(v.size()));
  encode_sparse(c, v.data(), v.size(), wire.data());
  std::vector<float> sum(16, 1.0F);
  decode_add_sparse(c, wire.data(), v.size(), sum.data());
  CHECK(sum[1] == -3.0F);
  CHECK(sum[0] == 1.0F);
  CHECK(sum[3] == 5.0F);
}

TEST_CASE("sparse wire: a chunk holding a NaN sends it and decodes to NaN", "[wire][sparse]") {
  const SparseCodec c{WireFormat::int2, 16, 0.125};
  std::vector<float> v = normal_values(32, 5);
  v[20] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> out = round_trip(c, v);
  CHECK(std::isnan(out[20]));
  for (size_t i = 0; i < 16; ++i)
    CHECK(std::isfinite(out[i]));
}
