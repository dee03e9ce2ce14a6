// The harness's context/continuation boundary, over any of prepare's tokenizers.
#include "autoloco/eval/pair_encoding.hpp"

#include <fmt/format.h>

#include "autoloco/eval/task_text.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

std::vector<PairIds> encode_pairs(const Tokenizer& tokenizer,
                                  const std::vector<std::pair<std::string, std::string>>& requests,
                                  const std::function<std::string(size_t)>& describe) {
  const auto name = [&](size_t i) { return describe ? describe(i) : fmt::format("request {}", i); };
  // Texts 2i and 2i + 1: request i's context alone, and context and continuation together.
  std::vector<std::string> texts;
  texts.reserve(2 * requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& [context, continuation] = requests[i];
    const size_t moved = python_trailing_space(context);
    if (moved == context.size()) {
      throw DataError(
          fmt::format("{}: its context is empty or only whitespace; the harness scores a "
                      "continuation after a non-empty context",
                      name(i)));
    }
    texts.push_back(context.substr(0, context.size() - moved));
    texts.push_back(context + continuation);
  }
  const std::vector<std::vector<uint32_t>> ids = tokenizer.encode_batch(texts);
  std::vector<PairIds> out;
  out.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<uint32_t>& alone = ids[2 * i];
    const std::vector<uint32_t>& joint = ids[2 * i + 1];
    if (joint.size() <= alone.size()) {
      throw DataError(
          fmt::format("{}: the continuation '{}' gets no token of its own after the context's {} "
                      "(the tokenizer merged it into the context)",
                      name(i), requests[i].second, alone.size()));
    }
    out.push_back(PairIds{
        alone, std::vector<uint32_t>(joint.begin() + static_cast<std::ptrdiff_t>(alone.size()),
                                     joint.end())});
  }
  return out;
}

}  // namespace autoloco
