#include "autoloco/config/preset_note.hpp"

#include <fmt/format.h>

#include "autoloco/config/model_presets.hpp"

namespace autoloco {

std::string preset_override_note(const Config& config,
                                 const std::map<std::string, std::string>& origin_of) {
  const std::string& preset = config.model.preset;
  if (preset.empty()) return "";
  Config from_preset = config;
  from_preset.model = ModelConfig{};
  apply_model_preset(preset, from_preset.model);
  const auto ours = config_values(config);
  const auto theirs = config_values(from_preset);
  std::string lines;
  for (size_t i = 0; i < ours.size() && i < theirs.size(); ++i) {
    const std::string& key = ours[i].first;
    const auto origin = origin_of.find(key);
    if (key == "model.preset" || origin == origin_of.end()) continue;
    if (ours[i].second == theirs[i].second) continue;
    lines += fmt::format("\n  {} = {} from {}, in place of the preset {}'s {}", key, ours[i].second,
                         origin->second, preset, theirs[i].second);
  }
  if (lines.empty()) return "";
  return "\nmodel keys given beside model.preset " + preset + ":" + lines +
         "\nunset them to take the preset's values, or set the keys the check names so that they "
         "agree";
}

}  // namespace autoloco
