// Downstream task files (eval.tasks): json lines in the layouts of the public task files, read
// into items whose context and choices are the strings lm-evaluation-harness scores
// (third_party/notes/lm-eval.md, section 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace autoloco {

enum class TaskFormat { hellaswag, arc, piqa, mc, lambada };

// "hellaswag", "arc", "piqa", "mc" or "lambada"; ConfigError naming `key` and the choices.
TaskFormat parse_task_format(const std::string& name, const std::string& key);
const char* task_format_name(TaskFormat format);

// One item: the context and the choices, each scored as the continuation " " + choice. A
// lambada item has one choice, the last word, and gold 0.
struct TaskItem {
  std::string context;
  std::vector<std::string> choices;
  size_t gold = 0;
  int64_t line = 0;  // in the file, from 1
};

// The fields each format reads from a line's JSON object:
//   hellaswag: activity_label, ctx_a, ctx_b, endings (list), label ("0".."3" or a number)
//   arc:       question, choices {text: [...], label: [...]}, answerKey (one of the labels)
//   piqa:      goal, sol1, sol2, label (0 or 1)
//   mc:        context, choices (list), gold (index)
//   lambada:   text (its last space-separated word is the target)
// A line that is not a JSON object, a missing or mistyped field, a gold out of range or an empty
// choice throws DataError naming the file, the line and the field. Blank lines are skipped.
std::vector<TaskItem> read_task_file(const std::string& path, TaskFormat format);

}  // namespace autoloco
