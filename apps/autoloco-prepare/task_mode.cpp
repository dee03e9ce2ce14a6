#include "task_mode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "autoloco/data/prepared_tokenizer.hpp"
#include "autoloco/eval/task_ids.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/timer.hpp"

namespace autoloco {

void tokenize_task_file(const TaskModeOptions& options) {
  const Timer timer;
  const TaskFormat format = parse_task_format(options.format, "--task-format");
  const PreparedData prepared = read_prepare_json(options.prepared);
  const std::vector<TaskItem> items = read_task_file(options.task_file, format);
  const std::unique_ptr<Tokenizer> tokenizer =
      open_prepared_tokenizer(prepared, options.hf_python, options.threads);
  TaskIds ids = tokenize_task(items, *tokenizer, options.task_file, format);
  ids.tokenizer_crc32 = prepared.tokenizer_model_crc32;
  const std::filesystem::path parent = std::filesystem::path(options.out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  write_task_ids(options.out, ids);
  size_t tokens = 0;
  size_t longest = 0;
  for (const TaskItemIds& item : ids.items) {
    for (const TaskChoiceIds& choice : item.choices) {
      const size_t n = item.context.size() + choice.continuation.size();
      tokens += n;
      longest = std::max(longest, n);
    }
  }
  fmt::print(
      "tokenized {} items of {} ({}): {} requests, {} tokens, the longest {}; {} tokenizer "
      "of {}; wrote {} in {:.1f} s\n",
      ids.items.size(), options.task_file, options.format, ids.requests(), tokens, longest,
      prepared.tokenizer, prepared.json_path, options.out, timer.seconds());
}

}  // namespace autoloco
