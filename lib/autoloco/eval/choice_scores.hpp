// lm-evaluation-harness's per-item outcomes and aggregates, computed its way, so that the tasks a
// run scores equal the harness's numbers (third_party/notes/lm-eval.md, section 3): acc and
// acc_norm of a multiple-choice item, the mean with its standard error, LAMBADA's perplexity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace autoloco {

// The outcome of one multiple-choice item.
struct ChoiceOutcome {
  size_t pred = 0;       // the choice of the highest summed log-likelihood
  size_t pred_norm = 0;  // the highest log-likelihood per character of the choice
  double acc = 0.0;      // 1 when pred is gold
  double acc_norm = 0.0;
};

// `loglikelihoods[i]`: choice i's continuation tokens' summed log-probabilities given the
// context; `choices[i]`: choice i's text as the task gives it (without the delimiter before it).
// As numpy's argmax: the first index of the maximum, and the first NaN if there is one.
// Throws Error when the sizes differ, a choice is empty or gold is out of range.
ChoiceOutcome score_choices(const std::vector<double>& loglikelihoods,
                            const std::vector<std::string>& choices, size_t gold);
// The same with each choice's code points given (`lengths`, TaskChoiceIds::chars).
ChoiceOutcome score_choices_by_length(const std::vector<double>& loglikelihoods,
                                      const std::vector<int64_t>& lengths, size_t gold);

// Unicode code points of UTF-8 text: Python's len() of the string, acc_norm's normaliser.
size_t code_points(const std::string& utf8);

// A metric over the items: the mean in item order and its standard error, the sample standard
// deviation (Bessel's n - 1) over sqrt(n); NaN standard error for fewer than 2 items.
struct MeanWithError {
  double mean = 0.0;
  double standard_error = 0.0;
  int64_t n = 0;
};
MeanWithError mean_with_stderr(const std::vector<double>& values);

// LAMBADA's perplexity: exp of minus the mean of the documents' summed log-likelihoods (per
// document, not per token).
double document_perplexity(const std::vector<double>& loglikelihoods);

}  // namespace autoloco
