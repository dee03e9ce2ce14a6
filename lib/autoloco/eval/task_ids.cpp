// Task items as token ids, and the json-lines file that carries them from prepare to the run.
#include "autoloco/eval/task_ids.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "autoloco/eval/choice_scores.hpp"
#include "autoloco/eval/pair_encoding.hpp"
#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {
namespace {

constexpr int64_t kVersion = 1;

std::vector<int64_t> as_int64(const std::vector<uint32_t>& ids) {
  return std::vector<int64_t>(ids.begin(), ids.end());
}

// Where a line's errors point.
struct IdsLine {
  const std::string& path;
  int64_t line;
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format(
        "{}:{}: {}; the task ids file is damaged: delete it and tokenize the task again "
        "(autoloco-prepare --task)",
        path, line, what));
  }
};

const rapidjson::Value& member(const rapidjson::Value& object, const char* name,
                               const IdsLine& at) {
  const auto it = object.FindMember(name);
  if (it == object.MemberEnd()) at.fail(fmt::format("no field \"{}\"", name));
  return it->value;
}

int64_t int_member(const rapidjson::Value& object, const char* name, const IdsLine& at) {
  const rapidjson::Value& v = member(object, name, at);
  if (!v.IsInt64()) at.fail(fmt::format("field \"{}\" is not an integer", name));
  return v.GetInt64();
}

std::string string_member(const rapidjson::Value& object, const char* name, const IdsLine& at) {
  const rapidjson::Value& v = member(object, name, at);
  if (!v.IsString()) at.fail(fmt::format("field \"{}\" is not a string", name));
  return std::string(v.GetString(), v.GetStringLength());
}

std::vector<uint32_t> id_list(const rapidjson::Value& v, const char* name, int64_t vocab,
                              const IdsLine& at) {
  if (!v.IsArray()) at.fail(fmt::format("field \"{}\" is not a list of token ids", name));
  std::vector<uint32_t> out;
  out.reserve(v.Size());
  for (const auto& id : v.GetArray()) {
    if (!id.IsInt64() || id.GetInt64() < 0 || id.GetInt64() >= vocab)
      at.fail(fmt::format("field \"{}\" holds an id outside the vocabulary of {}", name, vocab));
    out.push_back(static_cast<uint32_t>(id.GetInt64()));
  }
  return out;
}

rapidjson::Document parse_line(const std::string& text, const IdsLine& at) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError()) {
    at.fail(fmt::format("not valid JSON ({} at column {})",
                        rapidjson::GetParseError_En(doc.GetParseError()),
                        doc.GetErrorOffset() + 1));
  }
  if (!doc.IsObject()) at.fail("not a JSON object");
  return doc;
}

TaskItemIds read_item(const rapidjson::Value& doc, int64_t vocab, const IdsLine& at) {
  TaskItemIds item;
  item.line = int_member(doc, "line", at);
  const int64_t gold = int_member(doc, "gold", at);
  item.context = id_list(member(doc, "context", at), "context", vocab, at);
  const rapidjson::Value& choices = member(doc, "choices", at);
  if (!choices.IsArray() || choices.Empty()) at.fail("field \"choices\" is not a list of choices");
  for (const auto& c : choices.GetArray()) {
    if (!c.IsObject()) at.fail("a choice is not an object {chars, ids}");
    TaskChoiceIds choice;
    choice.chars = int_member(c, "chars", at);
    choice.continuation = id_list(member(c, "ids", at), "ids", vocab, at);
    if (choice.chars <= 0 || choice.continuation.empty()) at.fail("a choice is empty");
    item.choices.push_back(std::move(choice));
  }
  if (item.context.empty()) at.fail("the context has no token");
  if (gold < 0 || static_cast<size_t>(gold) >= item.choices.size())
    at.fail(fmt::format("gold {} is out of range for {} choices", gold, item.choices.size()));
  item.gold = static_cast<size_t>(gold);
  return item;
}

}  // namespace

size_t TaskIds::requests() const {
  size_t n = 0;
  for (const TaskItemIds& item : items)
    n += item.choices.size();
  return n;
}

TaskIds tokenize_task(const std::vector<TaskItem>& items, const Tokenizer& tokenizer,
                      const std::string& task_file, TaskFormat format) {
  std::vector<std::pair<std::string, std::string>> requests;
  std::vector<int64_t> line_of;  // per request
  for (const TaskItem& item : items) {
    for (const std::string& choice : item.choices) {
      // The harness's default target delimiter, before every choice (lambada's target too).
      requests.emplace_back(item.context, " " + choice);
      line_of.push_back(item.line);
    }
  }
  const std::vector<PairIds> pairs = encode_pairs(
      tokenizer, requests, [&](size_t i) { return fmt::format("{}:{}", task_file, line_of[i]); });
  TaskIds out;
  out.task_file = task_file;
  out.format = format;
  out.tokenizer = tokenizer.name();
  out.vocab_size = tokenizer.vocab_size();
  size_t r = 0;
  for (const TaskItem& item : items) {
    TaskItemIds ids;
    ids.line = item.line;
    ids.gold = item.gold;
    // Every choice shares the context, so its ids are the same in every request.
    ids.context = pairs[r].context;
    for (const std::string& choice : item.choices) {
      ids.choices.push_back({pairs[r].continuation, static_cast<int64_t>(code_points(choice))});
      ++r;
    }
    out.items.push_back(std::move(ids));
  }
  return out;
}

void write_task_ids(const std::string& path, const TaskIds& ids) {
  std::string text = JsonObject()
                         .add("autoloco_task_ids", kVersion)
                         .add("task_file", ids.task_file)
                         .add("format", task_format_name(ids.format))
                         .add("tokenizer", ids.tokenizer)
                         .add("vocab_size", ids.vocab_size)
                         .add("tokenizer_crc32", ids.tokenizer_crc32)
                         .add("items", static_cast<int64_t>(ids.items.size()))
                         .str();
  text += '\n';
  for (const TaskItemIds& item : ids.items) {
    std::vector<JsonObject> choices;
    for (const TaskChoiceIds& c : item.choices)
      choices.push_back(JsonObject().add("chars", c.chars).add("ids", as_int64(c.continuation)));
    text += JsonObject()
                .add("line", item.line)
                .add("gold", static_cast<int64_t>(item.gold))
                .add("context", as_int64(item.context))
                .add("choices", choices)
                .str();
    text += '\n';
  }
  write_file_durable(path, text);
}

TaskIds read_task_ids(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format(
        "cannot read task ids file '{}'; tokenize the task with autoloco-prepare --task", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_task_ids(text.str(), path);
}

TaskIds parse_task_ids(const std::string& contents, const std::string& path) {
  std::istringstream in(contents);
  std::string text;
  if (!std::getline(in, text)) IdsLine{path, 1}.fail("the file is empty");
  const rapidjson::Document header = parse_line(text, IdsLine{path, 1});
  const IdsLine at{path, 1};
  const int64_t version = int_member(header, "autoloco_task_ids", at);
  if (version != kVersion) {
    at.fail(fmt::format("version {} (this autoloco reads version {})", version, kVersion));
  }
  TaskIds ids;
  ids.task_file = string_member(header, "task_file", at);
  try {
    ids.format = parse_task_format(string_member(header, "format", at), "format");
  } catch (const ConfigError& e) {
    at.fail(e.what());
  }
  ids.tokenizer = string_member(header, "tokenizer", at);
  ids.vocab_size = int_member(header, "vocab_size", at);
  ids.tokenizer_crc32 = int_member(header, "tokenizer_crc32", at);
  const int64_t count = int_member(header, "items", at);
  if (ids.vocab_size <= 0 || count < 0) at.fail("a negative vocabulary or item count");
  int64_t line = 1;
  while (std::getline(in, text)) {
    ++line;
    const IdsLine item_at{path, line};
    ids.items.push_back(read_item(parse_line(text, item_at), ids.vocab_size, item_at));
  }
  if (static_cast<int64_t>(ids.items.size()) != count) {
    IdsLine{path, line}.fail(fmt::format("{} items where the header says {} (a truncated file)",
                                         ids.items.size(), count));
  }
  return ids;
}

}  // namespace autoloco
