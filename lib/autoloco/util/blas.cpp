#include "autoloco/util/blas.hpp"

#include <ATen/Context.h>

namespace autoloco {

std::string blas_library() {
  return at::hasMKL() ? "MKL" : "not MKL";
}

}  // namespace autoloco
