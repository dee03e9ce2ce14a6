// A task's figures from its requests' scores, as lm-evaluation-harness aggregates them
// (third_party/notes/lm-eval.md, section 3): acc and acc_norm with their standard errors for
// multiple choice; acc (greedy match) and perplexity for LAMBADA.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "autoloco/eval/choice_scores.hpp"
#include "autoloco/eval/task_ids.hpp"

namespace autoloco {

// One scored continuation: its tokens' summed log-probabilities given the context, and whether
// every one of them was the model's most likely token.
struct ContinuationScore {
  double loglikelihood = 0.0;
  bool greedy = false;
};

struct TaskMetrics {
  int64_t n = 0;           // items scored
  MeanWithError acc;       // multiple choice: highest log-likelihood; lambada: greedy match
  MeanWithError acc_norm;  // multiple choice only (n 0 for lambada)
  double perplexity = std::numeric_limits<double>::quiet_NaN();  // lambada only
};

// `scores`: one per request, in the order of `ids`' items and their choices.
// Throws Error when the counts differ.
TaskMetrics task_metrics(const TaskIds& ids, const std::vector<ContinuationScore>& scores);

}  // namespace autoloco
