// "Did you mean" for misspelled keys: nearest candidate by edit distance.
#pragma once

#include <string>
#include <vector>

namespace autoloco {

// Levenshtein distance (insert, delete, substitute each cost 1).
size_t edit_distance(const std::string& a, const std::string& b);

// "; did you mean 'x'?" for the closest candidate within a plausible distance, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace autoloco
