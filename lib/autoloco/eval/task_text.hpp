// The text transforms lm-evaluation-harness applies to its tasks' documents, as Python does them
// (third_party/notes/lm-eval.md, section 1), for the task formats of eval.tasks.
#pragma once

#include <string>
#include <vector>

namespace autoloco {

// Python's str.strip() for the whitespace of ASCII and C1/C0 separators (str.isspace over
// U+0009-U+000D, U+001C-U+001F, U+0020, U+0085, U+00A0). Wider Unicode spaces (U+2000-U+200A,
// U+3000, ...) are kept: the public task files have none at the ends of their fields.
std::string python_strip(const std::string& text);
// The bytes of the whitespace python_strip() would take off the end of `text`.
size_t python_trailing_space(const std::string& text);

// Python's str.capitalize() on ASCII letters: the first character upper case, the rest lower
// case. Other characters are kept as they are (Python would also change non-ASCII letters).
std::string python_capitalize_ascii(const std::string& text);

// HellaSwag's preprocess (tasks/hellaswag/utils.py): strip, " [title]" to ". ", every
// "[...]" that closes on the same line removed (non-greedy), then one pass of "  " to " ".
std::string hellaswag_preprocess(const std::string& text);

// Python's text.split(' '): on the single ASCII space only, empty pieces kept.
std::vector<std::string> split_on_space(const std::string& text);

}  // namespace autoloco
