// Scoring a task's requests with the model, as lm-evaluation-harness's hf backend scores them
// (third_party/notes/lm-eval.md, section 2.4): the input is the last seq_len + 1 tokens of
// context and continuation without the last, the continuation's tokens are scored at the
// positions before them, and a request's log-likelihood is their log-softmax summed.
//
// The requests are dealt over the ranks (longest first, round robin), and each rank's share is
// run in batches of similar lengths, right-padded (the model is causal: padding after a
// sequence cannot change its positions).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "autoloco/eval/task_ids.hpp"
#include "autoloco/eval/task_metrics.hpp"

namespace autoloco {

// Throws DataError naming the task file and line of the first item with a continuation longer
// than `seq_len` tokens (the harness refuses those; longer contexts lose their first tokens).
void check_task_fits(const TaskIds& ids, int64_t seq_len);

// Logits [B, T, vocab] of token ids [B, T] (int64, on the model's device).
using ForwardFn = std::function<torch::Tensor(const torch::Tensor&)>;

class TaskScorer {
 public:
  // `ids` must outlive the scorer.
  TaskScorer(const TaskIds& ids, int64_t seq_len);

  size_t requests() const { return requests_.size(); }

  // Rank `rank`'s batches of at most `rows` requests: indices into the task's requests in item
  // and choice order. Every rank can compute every rank's share (rank 0's is the longest).
  std::vector<std::vector<size_t>> batches(int rank, int ranks, int64_t rows) const;

  // Scores the requests of `batch` into `scores` (indexed by request).
  void score(const std::vector<size_t>& batch, const ForwardFn& forward,
             const torch::Device& device, std::vector<ContinuationScore>& scores) const;

 private:
  struct Request {
    const TaskItemIds* item;
    const TaskChoiceIds* choice;
  };
  std::vector<int64_t> input_tokens(const Request& r) const;

  int64_t seq_len_;
  std::vector<Request> requests_;
};

}  // namespace autoloco
