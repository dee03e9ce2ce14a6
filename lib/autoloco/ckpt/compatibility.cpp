#include "autoloco/ckpt/compatibility.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "autoloco/util/error.hpp"

namespace autoloco {

bool safe_to_change(const std::string& key) {
  // How the same state is computed (device, precision, kernels) may change; the state may not.
  // model.preset and model.init_from only said where the model keys and the first weights came
  // from: the keys themselves are compared, and a resume takes its weights from the checkpoint.
  // topology.shard only splits the same state over a dc's members, and any split reads a
  // checkpoint's pieces; topology.ranks_per_dc is the resume's topology check's
  // (--allow-topology-change), as the number of dcs is.
  static const std::array<const char*, 22> kSafe = {
      "run.name",         "run.out_dir",
      "run.steps",        "run.eval_every",
      "run.eval_batches", "run.log_every",
      "run.device",       "run.precision",
      "run.tf32",         "run.threads",
      "inner.adamw",      "outer.state_device",
      "data.train",       "data.val",
      "wan.mode",         "wan.bandwidth_gbps",
      "wan.latency_ms",   "interval.check_consistency",
      "model.preset",     "model.init_from",
      "topology.shard",   "topology.ranks_per_dc"};
  if (key.rfind("ckpt.", 0) == 0) return true;
  return std::find(kSafe.begin(), kSafe.end(), key) != kSafe.end();
}

ConfigComparison compare_configs(const Config& saved, const Config& now) {
  const auto before = config_values(saved);
  const auto after = config_values(now);
  ConfigComparison out;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].second == after[i].second) continue;
    ConfigChange c{before[i].first, before[i].second, after[i].second};
    (safe_to_change(c.key) ? out.allowed : out.refused).push_back(std::move(c));
  }
  return out;
}

std::vector<ConfigChange> check_config_resumable(const Config& saved, const Config& now,
                                                 const std::string& origin) {
  ConfigComparison c = compare_configs(saved, now);
  if (c.refused.empty()) return c.allowed;
  std::string lines;
  for (const ConfigChange& r : c.refused) {
    lines += fmt::format("\n  {}: {} in the checkpoint, {} now", r.key, r.saved, r.now);
  }
  throw ResumeMismatch(fmt::format(
      "cannot resume from '{}': the config differs in keys that the saved state depends on:{}\n"
      "Put the checkpoint's values back (--set KEY=VALUE), or start a new run (another "
      "run.name) without --resume. Keys that may change on resume: run.steps, run.eval_every, "
      "run.eval_batches, run.log_every, run.threads, run.device, run.precision, run.tf32, "
      "inner.adamw, outer.state_device, topology.shard, topology.ranks_per_dc (with "
      "--allow-topology-change), data paths, wan.*, ckpt.*, model.preset, model.init_from",
      origin, lines));
}

}  // namespace autoloco
