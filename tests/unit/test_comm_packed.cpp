// The inter-dc message format (payload in the wire dtype, scalars in double) and the WAN link
// model's cost formula, without MPI.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "autoloco/comm/packed_message.hpp"
#include "autoloco/comm/wan_link.hpp"

using namespace autoloco;

TEST_CASE("bf16: round to nearest even and exact widening", "[comm]") {
  CHECK(bf16_to_float(float_to_bf16(1.0F)) == 1.0F);
  CHECK(bf16_to_float(float_to_bf16(-3.5F)) == -3.5F);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  CHECK(bf16_to_float(float_to_bf16(1.0F + 0.00390625F)) == 1.0F);
  // Just above halfway rounds up.
  CHECK(bf16_to_float(float_to_bf16(1.0F + 0.0040F)) == 1.0F + 0.0078125F);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST_CASE("packed message: layout and round trip", "[comm]") {
  const std::vector<float> a = {1.5F, -2.0F, 3.25F};
  const double sa[2] = {1e-12, 1e15 + 1.0};

  SECTION("fp32 payload: exact, scalars aligned after it") {
    const PackedLayout layout{3, DType::f32, 2};
    CHECK(layout.payload_bytes() == 16);  // 12 padded to 8
    CHECK(layout.bytes() == 32);
    std::vector<std::byte> m(layout.bytes());
    pack(a.data(), sa, layout, m.data());
    std::vector<float> out(3);
    double s[2] = {};
    unpack(m.data(), layout, out.data(), s);
    CHECK(out == a);
    CHECK(s[0] == 1e-12);
    CHECK(s[1] == 1e15 + 1.0);  // doubles keep what fp32 would lose
  }
  SECTION("bf16 payload: half the bytes, values rounded to bf16, scalars still double") {
    const PackedLayout layout{3, DType::bf16, 2};
    CHECK(layout.payload_bytes() == 8);  // 6 padded to 8
    std::vector<std::byte> m(layout.bytes());
    const std::vector<float> c = {1.0F + 1.0F / 64, 100.0F, 0.1F};
    pack(c.data(), sa, layout, m.data());
    std::vector<float> out(3);
    double s[2] = {};
    unpack(m.data(), layout, out.data(), s);
    CHECK(out[0] == 1.0F + 1.0F / 64);
    CHECK(out[1] == 100.0F);
    CHECK(out[2] == Approx(0.1F).epsilon(1.0 / 256));
    CHECK(s[1] == 1e15 + 1.0);
  }
  SECTION("no scalars: a null scalar pointer is fine") {
    const PackedLayout layout{3, DType::f32, 0};
    std::vector<std::byte> m(layout.bytes());
    pack(a.data(), nullptr, layout, m.data());
    std::vector<float> out(3);
    unpack(m.data(), layout, out.data(), nullptr);
    CHECK(out == a);
  }
  SECTION("only fp32 and bf16 travel on the wire") {
    CHECK_THROWS(check_wire_dtype(DType::f64));
    CHECK_NOTHROW(check_wire_dtype(DType::bf16));
  }
}

TEST_CASE("WAN model: each phase costs the latency and the dc's busiest bytes over B", "[comm]") {
  WanModel m{1.0, 50.0, false, 4, 1};
  // A ring of 125 MB per dc over 4 dcs: 6 phases of a 31.25 MB chunk at 1 Gbit/s,
  // 6 * (0.05 + 3.125e7 / 1.25e8) = 1.8 s, ALGORITHMS.md's 2 (G - 1) (latency + n / (G B)).
  LinkTraffic ring;
  ring.phases = 6;
  ring.critical_bytes = 6 * 31'250'000;
  CHECK(m.seconds(ring) == Approx(1.8));
  m.members = 2;  // two members share the dc's link: each sends half, the dc the same total
  ring.critical_bytes /= 2;
  CHECK(m.seconds(ring) == Approx(1.8));
  m.dcs = 1;  // one dc never uses the link
  CHECK(m.seconds(ring) == 0.0);
  WanModel fast{100.0, 0.0, false, 2, 1};
  LinkTraffic two;
  two.phases = 2;
  two.critical_bytes = 1'000'000;
  CHECK(fast.seconds(two) == Approx(1e6 / 12.5e9));
}
