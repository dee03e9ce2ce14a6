// The checks every validate_*.cpp states its rules with: a ConfigError naming the key and what
// would be valid.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "autoloco/util/error.hpp"

namespace autoloco::config_rules {

inline void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw ConfigError(fmt::format("config key {}: {}", key, what));
}

template <class T>
inline void require_positive(T value, const std::string& key) {
  require(value > 0, key, fmt::format("must be > 0, got {}", value));
}

template <class T>
inline void require_non_negative(T value, const std::string& key) {
  require(value >= 0, key, fmt::format("must be >= 0, got {}", value));
}

inline void require_one_of(const std::string& value, const std::vector<std::string>& allowed,
                           const std::string& key) {
  for (const auto& a : allowed) {
    if (value == a) return;
  }
  require(false, key, fmt::format("'{}' is not one of: {}", value, fmt::join(allowed, ", ")));
}

}  // namespace autoloco::config_rules
