// What a resume may change. A checkpoint holds the effective config it was written with; the
// resuming run's config is compared with it key by key. Keys that only steer how long the run
// goes, what it logs, where it writes or how the link is accounted may change (each change is
// logged); any other difference would make the saved state mean something else and stops the
// resume with a message that lists every such key.
#pragma once

#include <string>
#include <vector>

#include "autoloco/config/config.hpp"

namespace autoloco {

struct ConfigChange {
  std::string key;
  std::string saved;  // in the checkpoint
  std::string now;    // in the resuming run
};

struct ConfigComparison {
  std::vector<ConfigChange> allowed;
  std::vector<ConfigChange> refused;
};

// True for keys that may differ on resume (run.steps, run.eval_every, logging, ckpt.*, ...).
bool safe_to_change(const std::string& key);

ConfigComparison compare_configs(const Config& saved, const Config& now);

// Throws ResumeMismatch naming every refused key with both values, or returns the allowed
// changes. `origin` names the checkpoint.
std::vector<ConfigChange> check_config_resumable(const Config& saved, const Config& now,
                                                 const std::string& origin);

}  // namespace autoloco
