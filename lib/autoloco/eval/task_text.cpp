// Python's string operations that lm-evaluation-harness's task definitions rely on.
#include "autoloco/eval/task_text.hpp"

namespace autoloco {
namespace {

// The length of the whitespace character that starts at `text[i]`, or 0 when there is none.
size_t space_at(const std::string& text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20)) return 1;
  // U+0085 and U+00A0 in UTF-8.
  if (c == 0xc2 && i + 1 < text.size()) {
    const auto d = static_cast<unsigned char>(text[i + 1]);
    if (d == 0x85 || d == 0xa0) return 2;
  }
  return 0;
}

// Whether whitespace ends just before `end`, and its length.
size_t space_before(const std::string& text, size_t end) {
  if (end >= 1 && space_at(text, end - 1) == 1) return 1;
  if (end >= 2 && space_at(text, end - 2) == 2) return 2;
  return 0;
}

std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(text, at, hit - at).append(to);
  return out.append(text, at, std::string::npos);
}

// re.sub(r"\[.*?\]", "", text): '.' matches anything but a newline.
std::string remove_bracketed(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '[') {
      const size_t close = text.find_first_of("]\n", i + 1);
      if (close != std::string::npos && text[close] == ']') {
        i = close + 1;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

}  // namespace

std::string python_strip(const std::string& text) {
  size_t begin = 0;
  size_t end = text.size();
  for (size_t n; begin < end && (n = space_at(text, begin)) > 0;)
    begin += n;
  for (size_t n; end > begin && (n = space_before(text, end)) > 0;)
    end -= n;
  return text.substr(begin, end - begin);
}

size_t python_trailing_space(const std::string& text) {
  size_t end = text.size();
  for (size_t n; end > 0 && (n = space_before(text, end)) > 0;)
    end -= n;
  return text.size() - end;
}

std::string python_capitalize_ascii(const std::string& text) {
  std::string out = text;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (i == 0 && c >= 'a' && c <= 'z') out[i] = static_cast<char>(c - 'a' + 'A');
    if (i > 0 && c >= 'A' && c <= 'Z') out[i] = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string hellaswag_preprocess(const std::string& text) {
  std::string out = python_strip(text);
  out = replace_all(out, " [title]", ". ");
  out = remove_bracketed(out);
  return replace_all(out, "  ", " ");
}

std::vector<std::string> split_on_space(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(' ', at)) != std::string::npos; at = hit + 1)
    out.push_back(text.substr(at, hit - at));
  out.push_back(text.substr(at));
  return out;
}

}  // namespace autoloco
