// How the config fuzz target reads its input, shared with the regression tests
// (tests/unit/test_fuzz_regressions.cpp): a YAML document, then optionally a line "--set" and
// one "section.key=value" override per line after it (at most kMaxOverrides).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace autoloco::fuzz {

struct ConfigInput {
  std::string yaml;
  std::vector<std::string> overrides;
};

inline ConfigInput split_config_input(const std::string& input) {
  constexpr const char* kSeparator = "\n--set\n";
  constexpr size_t kMaxOverrides = 16;
  ConfigInput out{input, {}};
  const size_t split = input.find(kSeparator);
  if (split == std::string::npos) return out;
  out.yaml = input.substr(0, split + 1);
  size_t begin = split + std::char_traits<char>::length(kSeparator);
  while (begin < input.size() && out.overrides.size() < kMaxOverrides) {
    size_t end = input.find('\n', begin);
    if (end == std::string::npos) end = input.size();
    out.overrides.push_back(input.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

}  // namespace autoloco::fuzz
