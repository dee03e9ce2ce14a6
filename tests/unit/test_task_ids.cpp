// A task's items as token ids (eval/task_ids.hpp): the harness's requests per item, the file that
// carries them from autoloco-prepare to the run, and its damaged forms.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/tokenizer.hpp"
#include "autoloco/eval/task_ids.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using Catch::Matchers::Contains;

namespace {

TaskIds sample_ids() {
  std::vector<TaskItem> items(2);
  items[0].context = "Question: why?\nAnswer: ";
  items[0].choices = {"because", "naïve"};
  items[0].gold = 1;
  items[0].line = 3;
  items[1].context = "the last";
  items[1].choices = {"word"};
  items[1].line = 4;
  return tokenize_task(items, ByteTokenizer(), "task.jsonl", TaskFormat::mc);
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("task ids: each choice is scored as the harness splits context and continuation",
          "[eval]") {
  const TaskIds ids = sample_ids();
  REQUIRE(ids.items.size() == 2);
  CHECK(ids.requests() == 3);
  CHECK(ids.tokenizer == "bytes");
  CHECK(ids.vocab_size == 256);
  const TaskItemIds& first = ids.items[0];
  CHECK(first.line == 3);
  CHECK(first.gold == 1);
  // The context's trailing space moved to the continuation, after the delimiter's.
  CHECK(first.context == encode_bytes("Question: why?\nAnswer:"));
  CHECK(first.choices[0].continuation == encode_bytes("  because"));
  CHECK(first.choices[0].chars == 7);
  CHECK(first.choices[1].continuation == encode_bytes("  naïve"));
  CHECK(first.choices[1].chars == 5);  // code points, not bytes
  CHECK(ids.items[1].choices[0].continuation == encode_bytes(" word"));
}

TEST_CASE("task ids: the file reads back as written, and damage is named", "[eval]") {
  const test::TempDir tmp("task-ids");
  const std::string path = tmp.file("t.ids.jsonl");
  TaskIds ids = sample_ids();
  ids.tokenizer_crc32 = 1234;
  write_task_ids(path, ids);
  const TaskIds back = read_task_ids(path);
  CHECK(back.task_file == "task.jsonl");
  CHECK(back.format == TaskFormat::mc);
  CHECK(back.tokenizer_crc32 == 1234);
  REQUIRE(back.items.size() == 2);
  CHECK(back.items[0].context == ids.items[0].context);
  CHECK(back.items[0].choices[1].continuation == ids.items[0].choices[1].continuation);
  CHECK(back.items[0].choices[1].chars == 5);
  CHECK(back.items[1].line == 4);

  const std::string text = test::read_text(path);
  const std::string header = text.substr(0, text.find('\n') + 1);
  const std::string first =
      text.substr(header.size(), text.find('\n', header.size()) + 1 - header.size());
  const auto damaged = [&](const std::string& contents, const std::string& what) {
    write(path, contents);
    CHECK_THROWS_WITH(read_task_ids(path), Contains(path) && Contains(what));
  };
  damaged(header + first, ":2: 1 items where the header says 2");
  damaged(header + first + "{\"line\": 4}\n", ":3: no field \"gold\"");
  damaged(header + first +
              "{\"line\":4,\"gold\":1,\"context\":[1],\"choices\":[{\"chars\":1,"
              "\"ids\":[2]}]}\n",
          "gold 1 is out of range for 1 choices");
  damaged(header + first +
              "{\"line\":4,\"gold\":0,\"context\":[300],\"choices\":[{\"chars\":1,"
              "\"ids\":[2]}]}\n",
          "outside the vocabulary of 256");
  damaged("{\"autoloco_task_ids\": 9}\n", ":1: version 9");
  damaged("", ":1: the file is empty");
  CHECK_THROWS_WITH(read_task_ids(tmp.file("none.jsonl")), Contains("autoloco-prepare --task"));
}

TEST_CASE("task ids: an empty context names the task file and line", "[eval]") {
  std::vector<TaskItem> items(1);
  items[0].context = "   ";
  items[0].choices = {"x"};
  items[0].line = 7;
  CHECK_THROWS_WITH(tokenize_task(items, ByteTokenizer(), "t.jsonl", TaskFormat::mc),
                    Contains("t.jsonl:7") && Contains("context is empty"));
}
