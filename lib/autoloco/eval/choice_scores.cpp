// Multiple-choice outcomes and aggregates as lm-evaluation-harness computes them.
#include "autoloco/eval/choice_scores.hpp"

#include <fmt/format.h>

#include <cmath>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// numpy.argmax: the first maximum, or the first NaN (a NaN compares as the largest).
size_t first_argmax(const std::vector<double>& values) {
  size_t best = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) return i;
    if (values[i] > values[best]) best = i;
  }
  return best;
}

}  // namespace

size_t code_points(const std::string& utf8) {
  size_t n = 0;
  for (const char c : utf8) {
    // Continuation bytes are 10xxxxxx; every other byte starts a code point.
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

ChoiceOutcome score_choices_by_length(const std::vector<double>& loglikelihoods,
                                      const std::vector<int64_t>& lengths, size_t gold) {
  if (loglikelihoods.size() != lengths.size() || lengths.empty()) {
    throw Error(fmt::format("score_choices: {} log-likelihoods for {} choices",
                            loglikelihoods.size(), lengths.size()));
  }
  if (gold >= lengths.size()) {
    throw Error(fmt::format("score_choices: gold {} of {} choices", gold, lengths.size()));
  }
  std::vector<double> per_char;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0) throw Error(fmt::format("score_choices: choice {} is empty", i));
    per_char.push_back(loglikelihoods[i] / static_cast<double>(lengths[i]));
  }
  ChoiceOutcome out;
  out.pred = first_argmax(loglikelihoods);
  out.pred_norm = first_argmax(per_char);
  out.acc = out.pred == gold ? 1.0 : 0.0;
  out.acc_norm = out.pred_norm == gold ? 1.0 : 0.0;
  return out;
}

ChoiceOutcome score_choices(const std::vector<double>& loglikelihoods,
                            const std::vector<std::string>& choices, size_t gold) {
  std::vector<int64_t> lengths;
  for (const std::string& choice : choices)
    lengths.push_back(static_cast<int64_t>(code_points(choice)));
  return score_choices_by_length(loglikelihoods, lengths, gold);
}

MeanWithError mean_with_stderr(const std::vector<double>& values) {
  MeanWithError out;
  out.n = static_cast<int64_t>(values.size());
  if (values.empty()) {
    out.mean = static_cast<double>(NAN);
    out.standard_error = static_cast<double>(NAN);
    return out;
  }
  // In item order, as the harness's mean and sample_stddev sum (Python 3.11's sum: no
  // compensation).
  double sum = 0.0;
  for (double v : values)
    sum += v;
  out.mean = sum / static_cast<double>(values.size());
  if (values.size() < 2) {
    out.standard_error = static_cast<double>(NAN);
    return out;
  }
  double squares = 0.0;
  for (double v : values)
    squares += (v - out.mean) * (v - out.mean);
  out.standard_error = std::sqrt(squares / static_cast<double>(values.size() - 1)) /
                       std::sqrt(static_cast<double>(values.size()));
  return out;
}

double document_perplexity(const std::vector<double>& loglikelihoods) {
  return std::exp(-mean_with_stderr(loglikelihoods).mean);
}

}  // namespace autoloco
