// Task files: one JSON object per line, turned into contexts and choices per format.
#include "autoloco/eval/task_file.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <fstream>

#include "autoloco/eval/task_text.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// Where a line's errors point.
struct LineRef {
  const std::string& path;
  int64_t line;
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format("{}:{}: {}; fix the line or the task's format", path, line, what));
  }
};

const rapidjson::Value& field(const rapidjson::Value& object, const char* name, const LineRef& at) {
  const auto it = object.FindMember(name);
  if (it == object.MemberEnd()) at.fail(fmt::format("no field \"{}\"", name));
  return it->value;
}

std::string string_field(const rapidjson::Value& object, const char* name, const LineRef& at) {
  const rapidjson::Value& v = field(object, name, at);
  if (!v.IsString()) at.fail(fmt::format("field \"{}\" is not a string", name));
  return std::string(v.GetString(), v.GetStringLength());
}

std::vector<std::string> string_list(const rapidjson::Value& v, const std::string& name,
                                     const LineRef& at) {
  if (!v.IsArray()) at.fail(fmt::format("field \"{}\" is not a list of strings", name));
  std::vector<std::string> out;
  for (const auto& item : v.GetArray()) {
    if (!item.IsString())
      at.fail(fmt::format("field \"{}\" holds a value that is not a string", name));
    out.emplace_back(item.GetString(), item.GetStringLength());
  }
  return out;
}

// A gold index given as a number or as a string of digits (HellaSwag's "label": "2").
size_t index_field(const rapidjson::Value& object, const char* name, const LineRef& at) {
  const rapidjson::Value& v = field(object, name, at);
  if (v.IsUint64()) return static_cast<size_t>(v.GetUint64());
  if (v.IsString()) {
    const std::string s(v.GetString(), v.GetStringLength());
    if (!s.empty() && s.size() < 10 &&
        std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return static_cast<size_t>(std::stoul(s));
    }
  }
  at.fail(fmt::format("field \"{}\" is not an index (a number from 0)", name));
}

TaskItem hellaswag_item(const rapidjson::Value& doc, const LineRef& at) {
  const std::string ctx = string_field(doc, "ctx_a", at) + " " +
                          python_capitalize_ascii(string_field(doc, "ctx_b", at));
  TaskItem item;
  item.context = hellaswag_preprocess(string_field(doc, "activity_label", at) + ": " + ctx);
  for (const std::string& ending : string_list(field(doc, "endings", at), "endings", at))
    item.choices.push_back(hellaswag_preprocess(ending));
  item.gold = index_field(doc, "label", at);
  return item;
}

TaskItem arc_item(const rapidjson::Value& doc, const LineRef& at) {
  TaskItem item;
  item.context = "Question: " + string_field(doc, "question", at) + "\nAnswer:";
  const rapidjson::Value& choices = field(doc, "choices", at);
  if (!choices.IsObject()) at.fail("field \"choices\" is not an object {text, label}");
  item.choices = string_list(field(choices, "text", at), "choices.text", at);
  const std::vector<std::string> labels =
      string_list(field(choices, "label", at), "choices.label", at);
  const std::string key = string_field(doc, "answerKey", at);
  const auto it = std::find(labels.begin(), labels.end(), key);
  if (it == labels.end()) at.fail(fmt::format("answerKey \"{}\" is none of choices.label", key));
  if (labels.size() != item.choices.size())
    at.fail("choices.text and choices.label differ in length");
  item.gold = static_cast<size_t>(it - labels.begin());
  return item;
}

TaskItem piqa_item(const rapidjson::Value& doc, const LineRef& at) {
  TaskItem item;
  item.context = "Question: " + string_field(doc, "goal", at) + "\nAnswer:";
  item.choices = {string_field(doc, "sol1", at), string_field(doc, "sol2", at)};
  item.gold = index_field(doc, "label", at);
  return item;
}

TaskItem mc_item(const rapidjson::Value& doc, const LineRef& at) {
  TaskItem item;
  item.context = string_field(doc, "context", at);
  item.choices = string_list(field(doc, "choices", at), "choices", at);
  item.gold = index_field(doc, "gold", at);
  return item;
}

TaskItem lambada_item(const rapidjson::Value& doc, const LineRef& at) {
  std::vector<std::string> words = split_on_space(string_field(doc, "text", at));
  if (words.size() < 2) at.fail("field \"text\" has no space: no context before its last word");
  TaskItem item;
  item.choices = {words.back()};
  words.pop_back();
  for (size_t i = 0; i < words.size(); ++i)
    item.context += (i == 0 ? "" : " ") + words[i];
  return item;
}

TaskItem read_item(const rapidjson::Value& doc, TaskFormat format, const LineRef& at) {
  switch (format) {
    case TaskFormat::hellaswag:
      return hellaswag_item(doc, at);
    case TaskFormat::arc:
      return arc_item(doc, at);
    case TaskFormat::piqa:
      return piqa_item(doc, at);
    case TaskFormat::mc:
      return mc_item(doc, at);
    case TaskFormat::lambada:
      return lambada_item(doc, at);
  }
  at.fail("unknown task format");
}

void check_item(const TaskItem& item, const LineRef& at) {
  if (item.choices.empty()) at.fail("no choices");
  if (item.gold >= item.choices.size()) {
    at.fail(fmt::format("gold {} is out of range for {} choices", item.gold, item.choices.size()));
  }
  for (size_t i = 0; i < item.choices.size(); ++i) {
    if (item.choices[i].empty()) at.fail(fmt::format("choice {} is empty", i));
  }
}

}  // namespace

TaskFormat parse_task_format(const std::string& name, const std::string& key) {
  for (TaskFormat f : {TaskFormat::hellaswag, TaskFormat::arc, TaskFormat::piqa, TaskFormat::mc,
                       TaskFormat::lambada}) {
    if (name == task_format_name(f)) return f;
  }
  throw ConfigError(fmt::format(
      "config key {}: unknown task format '{}'; use hellaswag, arc, piqa, mc or lambada", key,
      name));
}

const char* task_format_name(TaskFormat format) {
  switch (format) {
    case TaskFormat::hellaswag:
      return "hellaswag";
    case TaskFormat::arc:
      return "arc";
    case TaskFormat::piqa:
      return "piqa";
    case TaskFormat::mc:
      return "mc";
    case TaskFormat::lambada:
      return "lambada";
  }
  return "unknown";
}

std::vector<TaskItem> read_task_file(const std::string& path, TaskFormat format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot read task file '{}': check the path", path));
  std::vector<TaskItem> items;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (python_strip(line).empty()) continue;
    const LineRef at{path, number};
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseValidateEncodingFlag>(line.data(), line.size());
    if (doc.HasParseError()) {
      at.fail(fmt::format("not valid JSON ({} at column {})",
                          rapidjson::GetParseError_En(doc.GetParseError()),
                          doc.GetErrorOffset() + 1));
    }
    if (!doc.IsObject()) at.fail("not a JSON object");
    TaskItem item = read_item(doc, format, at);
    item.line = number;
    check_item(item, at);
    items.push_back(std::move(item));
  }
  if (items.empty()) throw DataError(fmt::format("task file '{}' holds no item", path));
  return items;
}

}  // namespace autoloco
