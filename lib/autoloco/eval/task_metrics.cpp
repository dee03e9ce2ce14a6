#include "autoloco/eval/task_metrics.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

TaskMetrics task_metrics(const TaskIds& ids, const std::vector<ContinuationScore>& scores) {
  if (scores.size() != ids.requests()) {
    throw Error(fmt::format("task_metrics: {} scores for the {} requests of {}", scores.size(),
                            ids.requests(), ids.task_file));
  }
  std::vector<double> acc;
  std::vector<double> acc_norm;
  std::vector<double> loglikelihoods;
  size_t r = 0;
  for (const TaskItemIds& item : ids.items) {
    if (ids.format == TaskFormat::lambada) {
      acc.push_back(scores[r].greedy ? 1.0 : 0.0);
      loglikelihoods.push_back(scores[r].loglikelihood);
      r += item.choices.size();
      continue;
    }
    std::vector<double> lls;
    std::vector<int64_t> lengths;
    for (const TaskChoiceIds& choice : item.choices) {
      lls.push_back(scores[r++].loglikelihood);
      lengths.push_back(choice.chars);
    }
    const ChoiceOutcome outcome = score_choices_by_length(lls, lengths, item.gold);
    acc.push_back(outcome.acc);
    acc_norm.push_back(outcome.acc_norm);
  }
  TaskMetrics out;
  out.n = static_cast<int64_t>(ids.items.size());
  out.acc = mean_with_stderr(acc);
  if (ids.format == TaskFormat::lambada) {
    out.perplexity = document_perplexity(loglikelihoods);
  } else {
    out.acc_norm = mean_with_stderr(acc_norm);
  }
  return out;
}

}  // namespace autoloco
