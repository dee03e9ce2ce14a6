// A message of the inter-dc all-reduce: a payload of floats carried in the wire dtype (fp32 or
// bf16), followed by a few scalars carried as doubles, so the round's statistics keep full
// precision whatever dtype the pseudo-gradients travel in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "autoloco/comm/communicator.hpp"

namespace autoloco {

struct PackedLayout {
  size_t count = 0;         // payload values
  DType wire = DType::f32;  // f32 or bf16
  size_t scalars = 0;       // doubles after the payload

  // The payload is padded to 8 bytes so the scalars are aligned.
  size_t payload_bytes() const;
  size_t bytes() const { return payload_bytes() + scalars * sizeof(double); }
};

// Throws CommError unless the wire dtype is f32 or bf16.
void check_wire_dtype(DType wire);

void pack(const float* values, const double* scalars, const PackedLayout& layout, std::byte* out);
void unpack(const std::byte* in, const PackedLayout& layout, float* values, double* scalars);

// bf16 with round-to-nearest-even (NaN stays NaN), and back (exact).
uint16_t float_to_bf16(float value);
float bf16_to_float(uint16_t value);

}  // namespace autoloco
