#include "autoloco/comm/packed_message.hpp"

#include <cmath>
#include <cstring>

#include "autoloco/util/error.hpp"

namespace autoloco {

size_t PackedLayout::payload_bytes() const {
  const size_t raw = count * dtype_size(wire);
  return (raw + 7) / 8 * 8;
}

void check_wire_dtype(DType wire) {
  if (wire != DType::f32 && wire != DType::bf16) {
    throw CommError("the inter-dc wire dtype must be f32 or bf16");
  }
}

uint16_t float_to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // stay a quiet NaN
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out = 0.0F;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

void pack(const float* values, const double* scalars, const PackedLayout& layout, std::byte* out) {
  check_wire_dtype(layout.wire);
  // An empty chunk (fewer values than ranks) may come with null pointers, which memcpy and
  // memset must not get even for 0 bytes (UndefinedBehaviorSanitizer).
  if (layout.bytes() == 0) return;
  std::memset(out, 0, layout.bytes());
  if (layout.wire == DType::f32) {
    if (layout.count > 0) std::memcpy(out, values, layout.count * sizeof(float));
  } else {
    for (size_t i = 0; i < layout.count; ++i) {
      const uint16_t h = float_to_bf16(values[i]);
      std::memcpy(out + 2 * i, &h, sizeof(h));
    }
  }
  if (layout.scalars > 0) {
    std::memcpy(out + layout.payload_bytes(), scalars, layout.scalars * sizeof(double));
  }
}

void unpack(const std::byte* in, const PackedLayout& layout, float* values, double* scalars) {
  check_wire_dtype(layout.wire);
  if (layout.wire == DType::f32) {
    if (layout.count > 0) std::memcpy(values, in, layout.count * sizeof(float));
  } else {
    for (size_t i = 0; i < layout.count; ++i) {
      uint16_t h = 0;
      std::memcpy(&h, in + 2 * i, sizeof(h));
      values[i] = bf16_to_float(h);
    }
  }
  if (layout.scalars > 0) {
    std::memcpy(scalars, in + layout.payload_bytes(), layout.scalars * sizeof(double));
  }
}

}  // namespace autoloco
