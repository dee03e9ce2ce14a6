// Task files of eval.tasks: each format's context and choices are the strings
// lm-evaluation-harness builds (expected values from its Python rules), and bad lines are errors
// that name the file, the line and the field.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"
#include "autoloco/eval/task_file.hpp"
#include "autoloco/eval/task_text.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using Catch::Matchers::Contains;

namespace {

std::string write_lines(const test::TempDir& dir, const std::string& name,
                        const std::vector<std::string>& lines) {
  const std::string path = (dir.path / name).string();
  std::ofstream out(path, std::ios::binary);
  for (const std::string& line : lines)
    out << line << "\n";
  return path;
}

std::string error_of(const std::string& path, TaskFormat format) {
  try {
    read_task_file(path, format);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("task text: Python's strip, capitalize and split(' ') as the harness uses them",
          "[eval]") {
  CHECK(python_strip(" \t a b \n") == "a b");
  CHECK(python_strip("\xc2\xa0 x \x1c") == "x");  // U+00A0 and U+001C are Python whitespace
  CHECK(python_strip("   ").empty());
  CHECK(python_capitalize_ascii("SHE ADDS sugar") == "She adds sugar");
  CHECK(python_capitalize_ascii("") == "");
  CHECK(split_on_space("The cat sat on  the mat") ==
        std::vector<std::string>{"The", "cat", "sat", "on", "", "the", "mat"});
}

TEST_CASE("task text: HellaSwag's preprocess, brackets, titles and double spaces", "[eval]") {
  // Expected values from tasks/hellaswag/utils.py's preprocess run in Python.
  CHECK(hellaswag_preprocess(" [title] pours the batter.  Then bakes") ==
        " pours the batter. Then bakes");
  CHECK(hellaswag_preprocess("eats the bowl [title] Fast.") == "eats the bowl. Fast.");
  CHECK(hellaswag_preprocess("walks away [x\n] quickly.   Done") ==
        "walks away [x\n] quickly.  Done");
}

TEST_CASE("task file: every format's context, choices and gold", "[eval]") {
  const test::TempDir dir("tasks");
  const std::string hellaswag = write_lines(
      dir, "h.jsonl",
      {R"({"activity_label":"Baking cookies","ctx_a":"A woman mixes flour in a bowl [header] Step one.","ctx_b":"SHE ADDS sugar","endings":[" [title] pours the batter.  Then bakes","eats the bowl [title] Fast."],"label":"1"})"});
  std::vector<TaskItem> items = read_task_file(hellaswag, TaskFormat::hellaswag);
  REQUIRE(items.size() == 1);
  CHECK(items[0].context ==
        "Baking cookies: A woman mixes flour in a bowl Step one. She adds sugar");
  CHECK(items[0].choices ==
        std::vector<std::string>{" pours the batter. Then bakes", "eats the bowl. Fast."});
  CHECK(items[0].gold == 1);
  CHECK(items[0].line == 1);

  const std::string arc = write_lines(
      dir, "a.jsonl",
      {"",
       R"({"question":"Which is a gas?","choices":{"text":["ice","steam","rock"],"label":["1","2","3"]},"answerKey":"2"})"});
  items = read_task_file(arc, TaskFormat::arc);
  REQUIRE(items.size() == 1);
  CHECK(items[0].context == "Question: Which is a gas?\nAnswer:");
  CHECK(items[0].choices == std::vector<std::string>{"ice", "steam", "rock"});
  CHECK(items[0].gold == 1);
  CHECK(items[0].line == 2);  // the blank line counts

  const std::string piqa = write_lines(
      dir, "p.jsonl",
      {R"({"goal":"Open a jar","sol1":"Twist the lid.","sol2":"Eat the lid.","label":0})"});
  items = read_task_file(piqa, TaskFormat::piqa);
  CHECK(items[0].context == "Question: Open a jar\nAnswer:");
  CHECK(items[0].choices.size() == 2);
  CHECK(items[0].gold == 0);

  const std::string mc =
      write_lines(dir, "m.jsonl", {R"({"context":"2 + 2 =","choices":["3","4"],"gold":1})"});
  items = read_task_file(mc, TaskFormat::mc);
  CHECK(items[0].context == "2 + 2 =");
  CHECK(items[0].gold == 1);

  const std::string lambada =
      write_lines(dir, "l.jsonl", {R"({"text":"The cat sat on  the mat"})"});
  items = read_task_file(lambada, TaskFormat::lambada);
  CHECK(items[0].context == "The cat sat on  the");
  CHECK(items[0].choices == std::vector<std::string>{"mat"});
  CHECK(items[0].gold == 0);
}

TEST_CASE("task file: bad lines are errors naming the file, the line and the field", "[eval]") {
  const test::TempDir dir("tasks-bad");
  const std::string good = R"({"context":"c","choices":["a","b"],"gold":0})";
  const auto err = [&](const std::string& line) {
    return error_of(write_lines(dir, "bad.jsonl", {good, line}), TaskFormat::mc);
  };
  CHECK_THAT(err("{\"context\": \"c\""), Contains("bad.jsonl:2") && Contains("not valid JSON"));
  CHECK_THAT(err("[1, 2]"), Contains(":2: not a JSON object"));
  CHECK_THAT(err(R"({"choices":["a"],"gold":0})"), Contains("no field \"context\""));
  CHECK_THAT(err(R"({"context":1,"choices":["a"],"gold":0})"),
             Contains("\"context\" is not a string"));
  CHECK_THAT(err(R"({"context":"c","choices":["a",2],"gold":0})"), Contains("\"choices\""));
  CHECK_THAT(err(R"({"context":"c","choices":["a","b"],"gold":2})"),
             Contains("gold 2 is out of range for 2 choices"));
  CHECK_THAT(err(R"({"context":"c","choices":["a","b"],"gold":-1})"), Contains("not an index"));
  CHECK_THAT(err(R"({"context":"c","choices":["a",""],"gold":0})"), Contains("choice 1 is empty"));
  CHECK_THAT(err("{\"context\":\"\xff\",\"choices\":[\"a\"],\"gold\":0}"),
             Contains("not valid JSON"));
  CHECK_THAT(
      error_of(write_lines(
                   dir, "arc.jsonl",
                   {R"({"question":"q","choices":{"text":["a"],"label":["A"]},"answerKey":"B"})"}),
               TaskFormat::arc),
      Contains("answerKey \"B\" is none of choices.label"));
  CHECK_THAT(error_of((dir.path / "missing.jsonl").string(), TaskFormat::mc),
             Contains("cannot read task file"));
  CHECK_THAT(error_of(write_lines(dir, "empty.jsonl", {"", "  "}), TaskFormat::mc),
             Contains("holds no item"));
  CHECK_THROWS_WITH(
      parse_task_format("hellaswg", "eval.tasks[0].format"),
      Contains("eval.tasks[0].format") && Contains("hellaswag, arc, piqa, mc or lambada"));
  CHECK(parse_task_format("lambada", "k") == TaskFormat::lambada);
}
