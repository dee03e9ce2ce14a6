// One config field's value in YAML: read with errors that name the key, written back so that it
// reads again, and its type named for docs/config.md.
#include "autoloco/config/yaml_values.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "autoloco/config/data_sources.hpp"
#include "autoloco/config/suggest.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco::yaml_values {

namespace {

template <class T>
T scalar_as(const YAML::Node& node, const std::string& key, const char* expected) {
  if (!node.IsScalar()) {
    throw ConfigError(
        fmt::format("config key {}: expected {}, got {}", key, expected, describe(node)));
  }
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError(
        fmt::format("config key {}: expected {}, got {}", key, expected, describe(node)));
  }
}

// A list entry that is a mapping of `keys` only (`what`: "a source", "a task"); ConfigError
// naming `key` otherwise, with the nearest valid key for a typo.
void check_entry(const YAML::Node& n, const std::string& key, const std::vector<std::string>& keys,
                 const std::string& what) {
  const std::string listed = fmt::format("{}", fmt::join(keys, ", "));
  if (!n.IsMap()) {
    throw ConfigError(
        fmt::format("config key {}: expected a mapping {{{}}}, got {}", key, listed, describe(n)));
  }
  for (const auto& item : n) {
    const std::string k = item.first.IsScalar() ? item.first.Scalar() : describe(item.first);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      throw ConfigError(fmt::format("config key {}: unknown key '{}'{}; {} has {}", key, k,
                                    did_you_mean(k, keys), what, listed));
    }
  }
}

DataSource read_source(const YAML::Node& n, const std::string& key, size_t index) {
  check_entry(n, key, {"name", "train", "val", "weight"}, "a source");
  DataSource s;
  if (!n["train"]) {
    throw ConfigError(fmt::format(
        "config key {}.train is missing: give a directory autoloco-prepare wrote, or shard "
        "globs",
        key));
  }
  read_value(n["train"], key + ".train", s.train);
  if (n["val"]) read_value(n["val"], key + ".val", s.val);
  if (n["weight"]) read_value(n["weight"], key + ".weight", s.weight);
  if (n["name"]) {
    read_value(n["name"], key + ".name", s.name);
  } else {
    s.name = default_source_name(s.train, index);
  }
  return s;
}

EvalTask read_task(const YAML::Node& n, const std::string& key) {
  check_entry(n, key, {"name", "path", "format", "limit"}, "a task");
  EvalTask t;
  for (const char* required : {"name", "path", "format"}) {
    if (!n[required]) {
      throw ConfigError(fmt::format(
          "config key {}.{} is missing: a task is {{name, path, format}} (docs/tasks.md)", key,
          required));
    }
  }
  read_value(n["name"], key + ".name", t.name);
  read_value(n["path"], key + ".path", t.path);
  read_value(n["format"], key + ".format", t.format);
  if (n["limit"]) read_value(n["limit"], key + ".limit", t.limit);
  return t;
}

// Flow style, so that a list (of sources, of tasks) prints on one line and reads back (the
// run's config.yaml).
template <class T, class Format>
std::string flow_list(const std::vector<T>& values, Format format) {
  std::vector<std::string> items;
  for (const auto& v : values)
    items.push_back(format(v));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

}  // namespace

const char* type_name(const int64_t&) {
  return "integer";
}
const char* type_name(const double&) {
  return "number";
}
const char* type_name(const bool&) {
  return "boolean";
}
const char* type_name(const std::string&) {
  return "string";
}
const char* type_name(const std::vector<double>&) {
  return "list of numbers";
}
const char* type_name(const std::vector<std::string>&) {
  return "list of strings";
}
const char* type_name(const std::vector<DataSource>&) {
  return "list of sources";
}
const char* type_name(const std::vector<EvalTask>&) {
  return "list of tasks";
}

std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return fmt::format("'{}'", node.Scalar());
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

void read_value(const YAML::Node& n, const std::string& key, int64_t& out) {
  out = scalar_as<int64_t>(n, key, "an integer");
}
void read_value(const YAML::Node& n, const std::string& key, double& out) {
  out = scalar_as<double>(n, key, "a number");
}
void read_value(const YAML::Node& n, const std::string& key, bool& out) {
  out = scalar_as<bool>(n, key, "true or false");
}
void read_value(const YAML::Node& n, const std::string& key, std::string& out) {
  out = scalar_as<std::string>(n, key, "a string");
}
void read_value(const YAML::Node& n, const std::string& key, std::vector<double>& out) {
  if (!n.IsSequence()) {
    throw ConfigError(
        fmt::format("config key {}: expected a list of numbers, got {}", key, describe(n)));
  }
  out.clear();
  for (size_t i = 0; i < n.size(); ++i) {
    out.push_back(scalar_as<double>(n[i], fmt::format("{}[{}]", key, i), "a number"));
  }
}
// A single string is accepted where a list of strings is expected (one path or glob).
void read_value(const YAML::Node& n, const std::string& key, std::vector<std::string>& out) {
  out.clear();
  if (n.IsScalar()) {
    out.push_back(n.Scalar());
    return;
  }
  if (!n.IsSequence()) {
    throw ConfigError(fmt::format("config key {}: expected a string or a list of strings, got {}",
                                  key, describe(n)));
  }
  for (size_t i = 0; i < n.size(); ++i) {
    out.push_back(scalar_as<std::string>(n[i], fmt::format("{}[{}]", key, i), "a string"));
  }
}

void read_value(const YAML::Node& n, const std::string& key, std::vector<DataSource>& out) {
  out.clear();
  if (!n.IsSequence()) {
    throw ConfigError(fmt::format(
        "config key {}: expected a list of sources ({{name, train, val, weight}}), got {}", key,
        describe(n)));
  }
  for (size_t i = 0; i < n.size(); ++i)
    out.push_back(read_source(n[i], fmt::format("{}[{}]", key, i), i));
}

void read_value(const YAML::Node& n, const std::string& key, std::vector<EvalTask>& out) {
  out.clear();
  if (!n.IsSequence()) {
    throw ConfigError(
        fmt::format("config key {}: expected a list of tasks ({{name, path, format}}), got {}", key,
                    describe(n)));
  }
  for (size_t i = 0; i < n.size(); ++i)
    out.push_back(read_task(n[i], fmt::format("{}[{}]", key, i)));
}

std::string format_value(const int64_t& v) {
  return fmt::format("{}", v);
}
std::string format_value(const double& v) {
  std::string s = fmt::format("{}", v);
  // Keep a decimal point or exponent so the value reads back as a number, not an integer.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
std::string format_value(const bool& v) {
  return v ? "true" : "false";
}
std::string format_value(const std::string& v) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << v;
  return e.c_str();
}
std::string format_value(const std::vector<double>& v) {
  return flow_list(v, [](double x) { return format_value(x); });
}
std::string format_value(const std::vector<std::string>& v) {
  return flow_list(v, [](const std::string& x) { return format_value(x); });
}
std::string format_value(const std::vector<DataSource>& v) {
  return flow_list(v, [](const DataSource& s) {
    return fmt::format("{{name: {}, train: {}, val: {}, weight: {}}}", format_value(s.name),
                       format_value(s.train), format_value(s.val), format_value(s.weight));
  });
}
std::string format_value(const std::vector<EvalTask>& v) {
  return flow_list(v, [](const EvalTask& t) {
    return fmt::format("{{name: {}, path: {}, format: {}, limit: {}}}", format_value(t.name),
                       format_value(t.path), format_value(t.format), format_value(t.limit));
  });
}

}  // namespace autoloco::yaml_values
