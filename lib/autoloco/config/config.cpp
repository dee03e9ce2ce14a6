#include "autoloco/config/config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "autoloco/config/data_sources.hpp"
#include "autoloco/config/model_presets.hpp"
#include "autoloco/config/preset_note.hpp"
#include "autoloco/config/suggest.hpp"
#include "autoloco/config/yaml_values.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

using namespace yaml_values;

// Reads each declared key of a section from the YAML mapping; unknown keys are caught later.
struct Loader {
  const YAML::Node& root;
  std::string section_name;

  template <class S>
  void section(const char* name, const char*, S& s) {
    section_name = name;
    YAML::Node node = root[name];
    if (!node || node.IsNull()) return;
    if (!node.IsMap()) {
      throw ConfigError(fmt::format("config section {}: expected a mapping of keys, got {}", name,
                                    describe(node)));
    }
    S::visit(s, *this);
  }

  template <class T>
  void operator()(const char* key, T& value, const char*) {
    YAML::Node node = root[section_name][key];
    if (!node) return;
    read_value(node, section_name + "." + key, value);
  }
};

struct YamlPrinter {
  std::ostringstream out;
  template <class S>
  void section(const char* name, const char* doc, S& s) {
    out << "# " << doc << "\n" << name << ":\n";
    S::visit(s, *this);
  }
  template <class T>
  void operator()(const char* key, const T& value, const char* doc) {
    out << "  " << key << ": " << format_value(value) << "  # " << doc << "\n";
  }
};

struct KeyCollector {
  std::string section_name;
  std::vector<std::string> keys;
  template <class S>
  void section(const char* name, const char*, S& s) {
    section_name = name;
    S::visit(s, *this);
  }
  template <class T>
  void operator()(const char* key, const T&, const char*) {
    keys.push_back(section_name + "." + key);
  }
};

struct ValueCollector {
  std::string section_name;
  std::vector<std::pair<std::string, std::string>> values;
  template <class S>
  void section(const char* name, const char*, S& s) {
    section_name = name;
    S::visit(s, *this);
  }
  template <class T>
  void operator()(const char* key, const T& value, const char*) {
    values.emplace_back(section_name + "." + key, format_value(value));
  }
};

struct MarkdownPrinter {
  std::ostringstream out;
  template <class S>
  void section(const char* name, const char* doc, S& s) {
    out << "\n## " << name << "\n\n" << doc << ".\n\n";
    out << "| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
    section_name = name;
    S::visit(s, *this);
  }
  template <class T>
  void operator()(const char* key, const T& value, const char* doc) {
    std::string shown = format_value(value);
    std::replace(shown.begin(), shown.end(), '|', '/');
    out << "| `" << section_name << "." << key << "` | " << type_name(value) << " | `" << shown
        << "` | " << doc << " |\n";
  }
  std::string section_name;
};

// A section or key name of the config: a plain word, never a list, a mapping or nothing.
std::string key_name(const YAML::Node& key, const std::string& origin, const std::string& what) {
  if (!key.IsScalar()) {
    throw ConfigError(
        fmt::format("{}: a config {} must be a plain name, got {}", origin, what, describe(key)));
  }
  return key.Scalar();
}

void check_known_keys(const YAML::Node& root, const std::string& origin) {
  if (!root || root.IsNull()) return;
  if (!root.IsMap()) {
    throw ConfigError(fmt::format("{}: the config must be a mapping of sections", origin));
  }
  const std::vector<std::string> keys = config_keys();
  std::set<std::string> sections;
  for (const auto& k : keys)
    sections.insert(k.substr(0, k.find('.')));
  for (const auto& entry : root) {
    const std::string section = key_name(entry.first, origin, "section");
    if (!sections.count(section)) {
      throw ConfigError(fmt::format("{}: unknown config section '{}'{}", origin, section,
                                    did_you_mean(section, {sections.begin(), sections.end()})));
    }
    if (!entry.second.IsMap()) continue;  // the Loader names the type error
    for (const auto& item : entry.second) {
      const std::string key =
          section + "." + key_name(item.first, origin, "key in section " + section);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        throw ConfigError(
            fmt::format("{}: unknown config key '{}'{}", origin, key, did_you_mean(key, keys)));
      }
    }
  }
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  const auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    throw ConfigError(fmt::format(
        "--set '{}': expected section.key=value, for example --set inner.lr=0.001", assignment));
  }
  const std::string key = assignment.substr(0, eq);
  const std::vector<std::string> keys = config_keys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    throw ConfigError(
        fmt::format("--set: unknown config key '{}'{}", key, did_you_mean(key, keys)));
  }
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("--set {}: the value is not valid YAML: {}", key, e.what()));
  }
  const std::string section = key.substr(0, dot);
  const std::string name = key.substr(dot + 1);
  if (!root[section] || !root[section].IsMap()) root[section] = YAML::Node(YAML::NodeType::Map);
  replace_other_data_form(root[section], key);
  root[section][name] = value;
}

bool model_key_given(const YAML::Node& root, const char* key) {
  const YAML::Node model = root["model"];
  return model && model.IsMap() && model[key] && !model[key].IsNull();
}

// A preset is the starting point of the model keys: the Loader then overrides the keys given
// beside it.
void apply_preset_given(const YAML::Node& root, ModelConfig& model) {
  if (!model_key_given(root, "preset")) return;
  std::string name;
  read_value(root["model"]["preset"], "model.preset", name);
  if (!name.empty()) apply_model_preset(name, model);
}

// Llama unties its head, GPT-2 ties it: the default follows the architecture unless the key or
// a preset said otherwise.
void default_tie_by_arch(const YAML::Node& root, ModelConfig& model) {
  if (model_key_given(root, "tie_embeddings") || !model.preset.empty()) return;
  model.tie_embeddings = model.arch != "llama";
}

// Where each model key given beside a preset came from: the file, or --set (which wins).
std::map<std::string, std::string> model_key_origins(const YAML::Node& file_root,
                                                     const std::vector<std::string>& overrides,
                                                     const std::string& origin) {
  std::map<std::string, std::string> out;
  const YAML::Node model = file_root["model"];
  if (model && model.IsMap()) {
    for (const auto& kv : model) {
      if (!kv.second.IsNull()) out["model." + kv.first.as<std::string>()] = origin;
    }
  }
  for (const std::string& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    if (key.rfind("model.", 0) == 0) out[key] = "--set";
  }
  return out;
}

// model.init_from's directory fills the model keys nobody gave (ModelDescriber, config.hpp);
// returns the keys it filled, which then need loading again.
std::vector<std::string> fill_from_init(YAML::Node& root, const Config& config,
                                        const ModelDescriber& describe,
                                        const std::map<std::string, std::string>& origin_of) {
  if (!describe || config.model.init_from.empty() || !config.model.preset.empty()) return {};
  Config described = config;
  described.model = describe(config.model.init_from);
  std::vector<std::string> filled;
  for (const auto& [key, value] : config_values(described)) {
    if (key.rfind("model.", 0) != 0 || origin_of.count(key) > 0) continue;
    if (key == "model.init_from" || key == "model.preset" || key == "model.recompute") continue;
    if (key == "model.seq_len" && described.model.arch == "llama") continue;
    if (!root["model"] || !root["model"].IsMap()) root["model"] = YAML::Node(YAML::NodeType::Map);
    root["model"][key.substr(6)] = YAML::Load(value);
    filled.push_back(key);
  }
  return filled;
}

Config load_root(const YAML::Node& root) {
  Config config;
  apply_preset_given(root, config.model);
  Loader loader{root, {}};
  Config::visit(config, loader);
  default_tie_by_arch(root, config.model);
  single_split_keys_give_way(root, config.data);
  return config;
}

}  // namespace

std::vector<std::string> config_keys() {
  Config defaults;
  KeyCollector c;
  Config::visit(defaults, c);
  return c.keys;
}

std::vector<std::pair<std::string, std::string>> config_values(const Config& config) {
  ValueCollector c;
  Config::visit(config, c);
  return c.values;
}

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                    const std::string& origin, const ModelDescriber& describe) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: not valid YAML: {}", origin, e.what()));
  }
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  check_known_keys(root, origin);
  const std::map<std::string, std::string> origin_of = model_key_origins(root, overrides, origin);
  for (const auto& o : overrides)
    apply_override(root, o);
  Config config = load_root(root);
  const std::vector<std::string> described = fill_from_init(root, config, describe, origin_of);
  if (!described.empty()) {
    config = load_root(root);
    config.model.described = described;
  }
  try {
    validate(config);
  } catch (const ConfigError& e) {
    const std::string note = preset_override_note(config, origin_of);
    if (note.empty()) throw;
    throw ConfigError(e.what() + note);
  }
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const ModelDescriber& describe) {
  std::ifstream in(path);
  if (!in) {
    throw ConfigError(fmt::format("cannot read config file '{}': check the path", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), overrides, path, describe);
}

std::string to_yaml(const Config& config) {
  YamlPrinter p;
  Config::visit(config, p);
  return p.out.str();
}

std::string config_reference_markdown() {
  Config defaults;
  MarkdownPrinter p;
  Config::visit(defaults, p);
  return p.out.str();
}

}  // namespace autoloco
