// Which BLAS LibTorch multiplies with, for the start log and the benchmarks' JSON. LibTorch's
// x86 wheels carry MKL on libgomp's OpenMP pool, the pool torch::set_num_threads sizes, so one
// thread count covers both and nothing beside it needs setting.
#pragma once

#include <string>

namespace autoloco {

// "MKL" or "not MKL" (a LibTorch built with another BLAS).
std::string blas_library();

}  // namespace autoloco
