#include "autoloco/eval/task_scorer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "autoloco/util/error.hpp"

namespace autoloco {
void check_task_fits(const TaskIds& ids, int64_t seq_len) {
  for (const TaskItemIds& item : ids.items) {
    for (const TaskChoiceIds& choice : item.choices) {
      if (static_cast<int64_t>(choice.continuation.size()) > seq_len) {
        throw DataError(fmt::format(
            "{}:{}: a choice of {} tokens is longer than the model's context (model.seq_len "
            "{}); lm-evaluation-harness refuses such items too: leave the item out or train a "
            "longer context",
            ids.task_file, item.line, choice.continuation.size(), seq_len));
      }
    }
  }
}

TaskScorer::TaskScorer(const TaskIds& ids, int64_t seq_len) : seq_len_(seq_len) {
  requests_.reserve(ids.requests());
  for (const TaskItemIds& item : ids.items) {
    for (const TaskChoiceIds& choice : item.choices)
      requests_.push_back({&item, &choice});
  }
}

// The model's input: context and continuation, left-truncated to seq_len + 1, without the last.
std::vector<int64_t> TaskScorer::input_tokens(const Request& r) const {
  std::vector<int64_t> all(r.item->context.begin(), r.item->context.end());
  all.insert(all.end(), r.choice->continuation.begin(), r.choice->continuation.end());
  const size_t keep = std::min(all.size(), static_cast<size_t>(seq_len_) + 1);
  return std::vector<int64_t>(all.end() - static_cast<std::ptrdiff_t>(keep), all.end() - 1);
}

std::vector<std::vector<size_t>> TaskScorer::batches(int rank, int ranks, int64_t rows) const {
  std::vector<int64_t> length(requests_.size());
  for (size_t i = 0; i < requests_.size(); ++i) {
    const size_t all = requests_[i].item->context.size() + requests_[i].choice->continuation.size();
    length[i] = std::min(static_cast<int64_t>(all) - 1, seq_len_);
  }
  std::vector<size_t> order(requests_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return length[a] > length[b]; });
  std::vector<std::vector<size_t>> out;
  for (size_t k = static_cast<size_t>(rank); k < order.size(); k += static_cast<size_t>(ranks)) {
    if (out.empty() || static_cast<int64_t>(out.back().size()) == rows) out.emplace_back();
    out.back().push_back(order[k]);
  }
  return out;
}

void TaskScorer::score(const std::vector<size_t>& batch, const ForwardFn& forward,
                       const torch::Device& device, std::vector<ContinuationScore>& scores) const {
  if (batch.empty()) return;
  std::vector<std::vector<int64_t>> inputs;
  int64_t width = 0;
  for (size_t index : batch) {
    inputs.push_back(input_tokens(requests_[index]));
    width = std::max(width, static_cast<int64_t>(inputs.back().size()));
  }
  const auto rows = static_cast<int64_t>(batch.size());
  torch::Tensor idx = torch::zeros({rows, width}, torch::kInt64);
  for (int64_t b = 0; b < rows; ++b) {
    const auto& in = inputs[static_cast<size_t>(b)];
    idx[b].narrow(0, 0, static_cast<int64_t>(in.size())).copy_(torch::tensor(in, torch::kInt64));
  }
  const torch::Tensor logits = forward(idx.to(device));
  for (int64_t b = 0; b < rows; ++b) {
    const Request& r = requests_[batch[static_cast<size_t>(b)]];
    const auto& cont = r.choice->continuation;
    const auto n = static_cast<int64_t>(cont.size());
    const auto in_len = static_cast<int64_t>(inputs[static_cast<size_t>(b)].size());
    // The logits at position p score token p + 1: the continuation's are the last n inputs'.
    const torch::Tensor log_probs =
        torch::log_softmax(logits[b].narrow(0, in_len - n, n).to(torch::kFloat32), -1);
    const torch::Tensor target =
        torch::tensor(std::vector<int64_t>(cont.begin(), cont.end()), torch::kInt64)
            .to(log_probs.device());
    ContinuationScore& s = scores[batch[static_cast<size_t>(b)]];
    // Summed in float32 and then widened, as the harness does (float(tensor.sum())).
    s.loglikelihood = log_probs.gather(1, target.unsqueeze(1)).sum().item<double>();
    s.greedy = log_probs.argmax(1).eq(target).all().item<bool>();
  }
}

}  // namespace autoloco
