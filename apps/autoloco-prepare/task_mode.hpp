// autoloco-prepare --task: a downstream task file (eval.tasks) tokenized with a prepared data
// directory's tokenizer into the task ids file the trainer scores (eval/task_ids.hpp). The
// trainer runs this itself for every task at its start; by hand it shows what a task costs.
#pragma once

#include <string>

namespace autoloco {

struct TaskModeOptions {
  std::string task_file;
  std::string format;    // hellaswag, arc, piqa, mc or lambada
  std::string prepared;  // the prepared data directory (or its prepare.json)
  std::string out;       // the task ids file to write
  std::string hf_python;
  int threads = 0;
};

// Prints one summary line; throws DataError or ConfigError on bad input.
void tokenize_task_file(const TaskModeOptions& options);

}  // namespace autoloco
