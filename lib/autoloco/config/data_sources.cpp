// Defaults and precedence of the two data forms (data.train/val against data.sources).
#include "autoloco/config/data_sources.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

std::string default_source_name(const std::vector<std::string>& train, size_t index) {
  if (train.size() == 1) {
    std::string path = train[0];
    while (path.size() > 1 && path.back() == '/')
      path.pop_back();
    const size_t slash = path.rfind('/');
    std::string last = slash == std::string::npos ? path : path.substr(slash + 1);
    const bool is_file = last.find_first_of("*?[") != std::string::npos ||
                         (last.size() > 4 && last.compare(last.size() - 4, 4, ".bin") == 0);
    if (is_file && slash != std::string::npos && slash > 0) {
      const std::string parent = path.substr(0, slash);
      const size_t up = parent.rfind('/');
      last = up == std::string::npos ? parent : parent.substr(up + 1);
    }
    if (!last.empty() && last.find_first_of("*?[") == std::string::npos && last != "." &&
        last != "..") {
      return last;
    }
  }
  return fmt::format("source{}", index);
}

void replace_other_data_form(YAML::Node section, const std::string& key) {
  if (key == "data.sources") {
    section.remove("train");
    section.remove("val");
  } else if (key == "data.train" || key == "data.val") {
    section.remove("sources");
  }
}

void single_split_keys_give_way(const YAML::Node& root, DataConfig& data) {
  if (data.sources.empty()) return;
  for (const char* key : {"train", "val"}) {
    const YAML::Node given = root["data"][key];
    const bool empty = given && given.IsSequence() && given.size() == 0;
    if (given && !empty) {
      throw ConfigError(fmt::format(
          "config key data.{}: set data.train and data.val, or data.sources, not both; a "
          "mixture's sources name their own train and val",
          key));
    }
  }
  data.train.clear();
  data.val.clear();
}

}  // namespace autoloco
