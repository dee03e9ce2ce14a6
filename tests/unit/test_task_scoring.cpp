// Scoring a task's requests (eval/task_scorer.hpp) and aggregating them (eval/task_metrics.hpp):
// the share of each rank, the harness's left truncation and positions, and its aggregates.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <set>
#include <vector>

#include "autoloco/data/tokenizer.hpp"
#include "autoloco/eval/task_metrics.hpp"
#include "autoloco/eval/task_scorer.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using Catch::Matchers::Contains;

namespace {

TaskIds ids_of(const std::vector<TaskItem>& items, TaskFormat format = TaskFormat::mc) {
  return tokenize_task(items, ByteTokenizer(), "t.jsonl", format);
}

TaskItem item(const std::string& context, std::vector<std::string> choices, size_t gold = 0) {
  TaskItem i;
  i.context = context;
  i.choices = std::move(choices);
  i.gold = gold;
  return i;
}

// A "model" whose logits at position p favour, with logit 5, the token that follows input[p]
// in "abc d" (and (input[p] + 1) % 256 for other tokens): the log-likelihood of a continuation
// says which of its tokens the rule predicts.
torch::Tensor rule_logits(const torch::Tensor& idx) {
  torch::Tensor next = (idx + 1) % 256;
  next.masked_fill_(idx.eq('c'), ' ');
  next.masked_fill_(idx.eq(' '), 'd');
  torch::Tensor logits = torch::zeros({idx.size(0), idx.size(1), 256});
  logits.scatter_(2, next.unsqueeze(2), 5.0);
  return logits;
}

}  // namespace

TEST_CASE("task scoring: the ranks' shares cover every request once, longest first", "[eval]") {
  std::vector<TaskItem> items;
  for (int i = 0; i < 7; ++i)
    items.push_back(item(std::string(static_cast<size_t>(3 + i), 'a'), {"b", "cc", "ddd"}));
  const TaskIds ids = ids_of(items);
  const TaskScorer scorer(ids, 64);
  std::multiset<size_t> seen;
  size_t most = 0;
  for (int rank = 0; rank < 3; ++rank) {
    const auto batches = scorer.batches(rank, 3, 2);
    if (rank == 0) most = batches.size();
    CHECK(batches.size() <= most);
    for (const auto& b : batches) {
      CHECK(b.size() <= 2);
      seen.insert(b.begin(), b.end());
    }
  }
  CHECK(seen.size() == 21);
  CHECK(std::set<size_t>(seen.begin(), seen.end()).size() == 21);
  // Rank 0's first request is the longest: the last item's last choice.
  CHECK(scorer.batches(0, 3, 2)[0][0] == 20);
}

TEST_CASE("task scoring: log-likelihoods at the continuation's positions, left-truncated",
          "[eval]") {
  // " d" after "abc": both tokens the rule's. " e" after "abc": the second is not.
  const TaskIds ids = ids_of({item("abc", {"d", "e"}), item("wxyzabc", {"d"})});
  const double lse = std::log(255.0 + std::exp(5.0));
  for (int64_t seq_len : {64, 3}) {
    INFO("seq_len " << seq_len);  // 3: "wxyzabc d" is scored on "bc " alone
    std::vector<ContinuationScore> scores(3);
    const TaskScorer scorer(ids, seq_len);
    for (const auto& batch : scorer.batches(0, 1, 8))
      scorer.score(batch, rule_logits, torch::kCPU, scores);
    CHECK(scores[0].loglikelihood == Approx(2 * (5.0 - lse)).epsilon(1e-6));
    CHECK(scores[0].greedy);
    CHECK(scores[1].loglikelihood == Approx((5.0 - lse) - lse).epsilon(1e-6));
    CHECK_FALSE(scores[1].greedy);
    CHECK(scores[2].loglikelihood == Approx(scores[0].loglikelihood).epsilon(1e-6));
    CHECK(scores[2].greedy);
  }
}

TEST_CASE("task scoring: a choice longer than the context window names the line", "[eval]") {
  std::vector<TaskItem> items = {item("ctx", {"a much longer choice"})};
  items[0].line = 9;
  CHECK_THROWS_WITH(check_task_fits(ids_of(items), 8),
                    Contains("t.jsonl:9") && Contains("model.seq_len 8"));
  CHECK_NOTHROW(check_task_fits(ids_of(items), 21));
}

TEST_CASE("task metrics: acc and acc_norm per item, lambada's greedy match and perplexity",
          "[eval]") {
  const TaskIds mc = ids_of({item("q", {"a", "bbbb"}, 1), item("q", {"a", "bb"}, 0)});
  // Item 1: ll -1 and -2 (per char -1, -0.5): acc picks 0 (wrong), acc_norm 1 (right).
  // Item 2: ll -3 and -1 (per char -3, -0.5): both pick 1 (wrong).
  const TaskMetrics m =
      task_metrics(mc, {{-1.0, false}, {-2.0, false}, {-3.0, false}, {-1.0, false}});
  CHECK(m.n == 2);
  CHECK(m.acc.mean == 0.0);
  CHECK(m.acc_norm.mean == 0.5);
  CHECK(m.acc_norm.standard_error == Approx(0.5));
  CHECK(std::isnan(m.perplexity));
  const TaskIds lambada =
      ids_of({item("a", {"b"}), item("c", {"d"}), item("e", {"f"})}, TaskFormat::lambada);
  const TaskMetrics l = task_metrics(lambada, {{-1.0, true}, {-2.0, false}, {-3.0, true}});
  CHECK(l.acc.mean == Approx(2.0 / 3.0));
  CHECK(l.perplexity == Approx(std::exp(2.0)));
  CHECK(l.acc_norm.n == 0);
  CHECK_THROWS_AS(task_metrics(lambada, {{-1.0, true}}), Error);
}
