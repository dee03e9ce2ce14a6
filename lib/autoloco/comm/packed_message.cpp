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
  std::memset(out, 0, layout.bytes());
  if (layout.wire == DType::f32) {
    std::memcpy(out, values, layout.count * sizeof(float));
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
    std::memcpy(values, in, layout.count * sizeof(float));
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

void packed_sum(const std::byte* in, std::byte* inout, const PackedLayout& layout) {
  const bool aligned = reinterpret_cast<uintptr_t>(in) % alignof(float) == 0 &&
                       reinterpret_cast<uintptr_t>(inout) % alignof(float) == 0;
  if (layout.wire == DType::f32 && aligned) {
    // The hot case (fp32 pseudo-gradients): a plain loop the compiler vectorises.
    const auto* a = reinterpret_cast<const float*>(in);
    auto* b = reinterpret_cast<float*>(inout);
    for (size_t i = 0; i < layout.count; ++i)
      b[i] += a[i];
  } else if (layout.wire == DType::f32) {
    for (size_t i = 0; i < layout.count; ++i) {
      float a = 0.0F;
      float b = 0.0F;
      std::memcpy(&a, in + 4 * i, 4);
      std::memcpy(&b, inout + 4 * i, 4);
      b += a;
      std::memcpy(inout + 4 * i, &b, 4);
    }
  } else {
    for (size_t i = 0; i < layout.count; ++i) {
      uint16_t a = 0;
      uint16_t b = 0;
      std::memcpy(&a, in + 2 * i, 2);
      std::memcpy(&b, inout + 2 * i, 2);
      const uint16_t sum = float_to_bf16(bf16_to_float(a) + bf16_to_float(b));
      std::memcpy(inout + 2 * i, &sum, 2);
    }
  }
  const size_t offset = layout.payload_bytes();
  for (size_t i = 0; i < layout.scalars; ++i) {
    double a = 0.0;
    double b = 0.0;
    std::memcpy(&a, in + offset + 8 * i, 8);
    std::memcpy(&b, inout + offset + 8 * i, 8);
    b += a;
    std::memcpy(inout + offset + 8 * i, &b, 8);
  }
}

}  // namespace autoloco
