#include "autoloco/util/env_limit.hpp"

#include <cstdlib>

namespace autoloco {

size_t env_limit(const char* name, size_t fallback, size_t minimum) {
  const char* text = std::getenv(name);
  const long long n = text != nullptr ? std::atoll(text) : 0;
  return n >= 0 && static_cast<unsigned long long>(n) >= minimum ? static_cast<size_t>(n)
                                                                 : fallback;
}

}  // namespace autoloco
