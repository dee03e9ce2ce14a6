#include "autoloco/config/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace autoloco {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::string::npos;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // Beyond about a third of the word the suggestion is noise rather than help.
  if (best.empty() || best_distance > std::max<size_t>(2, word.size() / 3)) return "";
  return fmt::format("; did you mean '{}'?", best);
}

}  // namespace autoloco
