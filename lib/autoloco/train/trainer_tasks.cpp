// The Trainer's downstream tasks (eval.tasks, docs/tasks.md): tokenized once at the start by
// autoloco-prepare with the run's tokenizer, scored on the anchor at every evaluation with the
// requests spread over the world's ranks, and reported as lm-evaluation-harness reports them.
#include <fmt/ranges.h>
#include <unistd.h>
#include <cmath>

#include <cstdlib>
#include <filesystem>

#include "autoloco/comm/text_collectives.hpp"
#include "autoloco/eval/task_file.hpp"
#include "autoloco/train/precision.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/child_process.hpp"
#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/file_bytes.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/timer.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

namespace fs = std::filesystem;

// autoloco-prepare of this build: $AUTOLOCO_PREPARE, else the one beside this executable.
std::string prepare_executable() {
  if (const char* path = std::getenv("AUTOLOCO_PREPARE"); path && *path) return path;
  return sibling_executable("autoloco-prepare");
}

}  // namespace

std::string Trainer::tokenize_task(const EvalTask& task, const PreparedData& prepared) const {
  // Into a temporary directory: the run directory is opened later, once every input is known
  // good (keep_task_ids() copies the ids there).
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("autoloco-tasks-{}", static_cast<long>(getpid()));
  fs::create_directories(dir);
  const std::string out = (dir / (task.name + ".ids.jsonl")).string();
  const std::vector<std::string> argv = {prepare_executable(), "--task",    task.path,
                                         "--task-format",      task.format, "--tokenizer-from",
                                         prepared.json_path,   "--out",     out};
  log::info("eval.tasks {}: tokenizing {} with {}", task.name, task.path, prepared.describe());
  int status = 0;
  try {
    status = run_to_end(argv);
  } catch (const Error& e) {
    throw ConfigError(fmt::format(
        "config key eval.tasks: {}; autoloco-prepare tokenizes the tasks and is looked for beside "
        "autoloco-train: install it there or name it in AUTOLOCO_PREPARE",
        e.what()));
  }
  if (status != 0) {
    throw DataError(fmt::format(
        "eval.tasks {}: autoloco-prepare could not tokenize '{}' (exit status {}; its message "
        "is above); fix the task file or the entry's format",
        task.name, task.path, status));
  }
  auto text = read_file_bytes(out);
  fs::remove_all(dir);
  if (!text) throw DataError(fmt::format("eval.tasks {}: cannot read '{}'", task.name, out));
  return std::move(*text);
}

void Trainer::keep_task_ids() {
  for (const auto& task : tasks_) {
    if (run_dir_) {
      const fs::path dir = fs::path(run_dir_->path()) / "tasks";
      fs::create_directories(dir);
      write_file_durable((dir / (task->config.name + ".ids.jsonl")).string(), task->ids_text);
    }
    task->ids_text.clear();
    task->ids_text.shrink_to_fit();
  }
}

void Trainer::load_tasks() {
  if (config_.eval.tasks.empty()) return;
  const std::optional<PreparedData>& prepared = (*data_)[0].val->prepared();
  if (!prepared) {
    throw ConfigError(
        "config key eval.tasks: the val shards have no prepare.json, so the run's tokenizer is "
        "unknown; tasks need data prepared by autoloco-prepare");
  }
  for (size_t i = 0; i < config_.eval.tasks.size(); ++i) {
    const EvalTask& task = config_.eval.tasks[i];
    std::string text;
    if (topo_.world_rank == 0) {
      if (!fs::is_regular_file(task.path)) {
        throw ConfigError(
            fmt::format("config key eval.tasks[{}].path: no task file '{}'", i, task.path));
      }
      text = tokenize_task(task, *prepared);
    }
    broadcast_text(world_comm_->handle(), text, 0);
    auto loaded = std::make_unique<LoadedTask>();
    loaded->config = task;
    loaded->ids = parse_task_ids(text, task.name + ".ids.jsonl");
    loaded->ids_text = std::move(text);
    if (task.limit > 0 && static_cast<size_t>(task.limit) < loaded->ids.items.size())
      loaded->ids.items.resize(static_cast<size_t>(task.limit));
    check_task_fits(loaded->ids, config_.model.seq_len);
    loaded->scorer = std::make_unique<TaskScorer>(loaded->ids, config_.model.seq_len);
    if (options_.print_progress) {
      log::info("eval.tasks {}: {} items, {} requests ({} format)", task.name,
                loaded->ids.items.size(), loaded->ids.requests(), task.format);
    }
    tasks_.push_back(std::move(loaded));
  }
}

void Trainer::score_tasks(Decoder& model) {
  task_results_.clear();
  if (tasks_.empty()) return;
  // A fully sharded forward is collective inside the dc: every rank runs as many batches as
  // rank 0, whose share is the largest, the missing ones on a token it does not count.
  const bool collective = instances_[0].shard->mode() == ShardMode::full;
  const ForwardFn forward = [&](const torch::Tensor& idx) {
    AutocastScope autocast(device_, bf16_);
    return model->forward(idx);
  };
  std::vector<double> flat;  // per request of every task: log-likelihood, greedy
  for (const auto& task : tasks_) {
    const TaskScorer& scorer = *task->scorer;
    std::vector<ContinuationScore> scores(scorer.requests());
    const auto batches =
        scorer.batches(topo_.world_rank, topo_.world_size, config_.data.batch_size);
    const size_t rounds = collective
                              ? scorer.batches(0, topo_.world_size, config_.data.batch_size).size()
                              : batches.size();
    for (size_t k = 0; k < rounds; ++k) {
      if (k < batches.size()) {
        scorer.score(batches[k], forward, device_, scores);
      } else {
        forward(torch::zeros({1, 1}, torch::kInt64).to(device_));
      }
    }
    for (const ContinuationScore& s : scores) {
      flat.push_back(s.loglikelihood);
      flat.push_back(s.greedy ? 1.0 : 0.0);
    }
  }
  const Watch watch("the tasks' all-reduce");
  world_comm_->allreduce_sum(flat.data(), flat.size());
  size_t at = 0;
  for (const auto& task : tasks_) {
    std::vector<ContinuationScore> scores(task->scorer->requests());
    for (ContinuationScore& s : scores) {
      s.loglikelihood = flat[at++];
      s.greedy = flat[at++] > 0.5;
    }
    task_results_.push_back({task->config.name, task->ids.format, task_metrics(task->ids, scores)});
    if (run_dir_) write_task_scores(*task, scores);
  }
}

// <run>/tasks/<name>.scores.jsonl, the last evaluation's log-likelihoods: what a comparison with
// lm-evaluation-harness's samples reads (scripts/lm_eval_compare.py).
void Trainer::write_task_scores(const LoadedTask& task,
                                const std::vector<ContinuationScore>& scores) const {
  std::string text;
  size_t r = 0;
  for (const TaskItemIds& item : task.ids.items) {
    std::vector<double> lls;
    std::vector<int64_t> greedy;
    for (size_t c = 0; c < item.choices.size(); ++c, ++r) {
      lls.push_back(scores[r].loglikelihood);
      greedy.push_back(scores[r].greedy ? 1 : 0);
    }
    text += JsonObject()
                .add("line", item.line)
                .add("gold", static_cast<int64_t>(item.gold))
                .add("loglikelihoods", lls)
                .add("greedy", greedy)
                .str();
    text += '\n';
  }
  const fs::path dir = fs::path(run_dir_->path()) / "tasks";
  fs::create_directories(dir);
  write_file_durable((dir / (task.config.name + ".scores.jsonl")).string(), text);
}

JsonObject Trainer::tasks_json() const {
  JsonObject out;
  for (const TaskResult& t : task_results_) {
    JsonObject m;
    m.add("acc", t.metrics.acc.mean).add("acc_stderr", t.metrics.acc.standard_error);
    if (t.format == TaskFormat::lambada) {
      m.add("perplexity", t.metrics.perplexity);
    } else {
      m.add("acc_norm", t.metrics.acc_norm.mean)
          .add("acc_norm_stderr", t.metrics.acc_norm.standard_error);
    }
    out.add(t.name, m.add("n", t.metrics.n));
  }
  return out;
}

// "hellaswag acc_norm 0.2610±0.0044, lambada acc 0.0120±0.0015 ppl 812.3".
std::string Trainer::tasks_progress() const {
  std::vector<std::string> parts;
  for (const TaskResult& t : task_results_) {
    if (t.format == TaskFormat::lambada) {
      parts.push_back(fmt::format("{} acc {:.4f}±{:.4f} ppl {:.4g}", t.name, t.metrics.acc.mean,
                                  t.metrics.acc.standard_error, t.metrics.perplexity));
    } else {
      parts.push_back(fmt::format("{} acc_norm {:.4f}±{:.4f}", t.name, t.metrics.acc_norm.mean,
                                  t.metrics.acc_norm.standard_error));
    }
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace autoloco
