// The two forms of a run's data, data.train/data.val (one corpus) and data.sources (a weighted
// mixture): how a source is named by default and how one form gives way to the other.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"

namespace autoloco {

// "data/web" and "data/web/train_*.bin" both name the source "web"; otherwise "source<index>".
std::string default_source_name(const std::vector<std::string>& train, size_t index);

// --set of one form replaces the other form given in the file: `section` is the config's data
// mapping, `key` the key being set.
void replace_other_data_form(YAML::Node section, const std::string& key);

// With data.sources, data.train and data.val (defaults) give way; given beside it in one file,
// they are a ConfigError rather than silently unused. Empty lists (a run's config.yaml) are fine.
void single_split_keys_give_way(const YAML::Node& root, DataConfig& data);

}  // namespace autoloco
