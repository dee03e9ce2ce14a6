// The elastic mode's settings from a run's config (docs/elastic.md): the lighthouse's address,
// the shared key read from elastic.key_file, the timeouts, and the run's identity, which the
// lighthouse checks every dc against (a dc of another model, topology or method is refused,
// naming the field that differs).
#pragma once

#include "autoloco/comm/elastic_link.hpp"
#include "autoloco/config/config.hpp"

namespace autoloco {

// ConfigError naming the key for a malformed lighthouse address or an unusable key file.
ElasticSettings elastic_settings(const Config& config);

}  // namespace autoloco
