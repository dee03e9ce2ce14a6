// A task file's items as token ids: what `autoloco-prepare --task` writes and the trainer scores.
// The trainer cannot load every tokenizer itself (SentencePiece shares no process with
// LibTorch), so autoloco-prepare tokenizes each task with the run's own tokenizer and the
// harness's context/continuation boundary (pair_encoding.hpp), and the run reads the ids.
//
// The file is json lines: a header line
//   {"autoloco_task_ids": 1, "task_file": ..., "format": ..., "tokenizer": ..., "vocab_size": N,
//    "tokenizer_crc32": C, "items": n}
// then one line per item
//   {"line": L, "gold": g, "context": [ids], "choices": [{"chars": c, "ids": [ids]}, ...]}
// (`chars`: the choice's Unicode code points, acc_norm's normaliser). Readable, and small beside
// the shards: HellaSwag's 10,042 items are about 20 MB of bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/data/tokenizer.hpp"
#include "autoloco/eval/task_file.hpp"

namespace autoloco {

struct TaskChoiceIds {
  std::vector<uint32_t> continuation;  // the ids scored: " " + choice, past the context's
  int64_t chars = 0;                   // code points of the choice's text (acc_norm)
};

struct TaskItemIds {
  int64_t line = 0;  // in the task file, from 1
  size_t gold = 0;
  std::vector<uint32_t> context;
  std::vector<TaskChoiceIds> choices;
};

struct TaskIds {
  std::string task_file;  // the task file the ids came from
  TaskFormat format = TaskFormat::mc;
  std::string tokenizer;         // prepare.json's name: "bytes", "sentencepiece" or "hf"
  int64_t vocab_size = 0;        // the tokenizer's
  int64_t tokenizer_crc32 = -1;  // prepare.json's CRC-32 of the tokenizer's file; -1 for bytes
  std::vector<TaskItemIds> items;

  size_t requests() const;  // choices over all items: one scored continuation each
};

// The items' requests (context, " " + choice) encoded as lm-evaluation-harness's hf backend
// encodes them, in one batch to the tokenizer. Throws DataError naming `task_file` and the line
// of an item whose context is empty or whose choice gets no token of its own.
TaskIds tokenize_task(const std::vector<TaskItem>& items, const Tokenizer& tokenizer,
                      const std::string& task_file, TaskFormat format);

// Writes `ids` to `path` (through a temporary file and a rename: a reader never sees half).
void write_task_ids(const std::string& path, const TaskIds& ids);

// Reads a file write_task_ids() wrote. Throws DataError naming the file and the line when it is
// missing, of another version, damaged (a line that is not the JSON said above, an id outside
// the vocabulary, a gold out of range) or shorter than its header says.
TaskIds read_task_ids(const std::string& path);
// The same from the file's contents (`path` names it in errors).
TaskIds parse_task_ids(const std::string& contents, const std::string& path);

}  // namespace autoloco
