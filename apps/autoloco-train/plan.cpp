// autoloco-train --plan (plan.hpp): each option's value parsed where its name is known, so that
// an error names it.
#include "plan.hpp"

#include <algorithm>
#include <array>

#include "autoloco/train/plan_report.hpp"
#include "autoloco/util/error.hpp"

namespace {

constexpr std::array<const char*, 5> kPlanOptions = {"--world", "--device-memory", "--step-time",
                                                     "--mfu", "--device-flops"};

}  // namespace

bool is_plan_option(const std::string& arg) {
  return std::find(kPlanOptions.begin(), kPlanOptions.end(), arg) != kPlanOptions.end();
}

std::string plan_text(const autoloco::Config& config, const std::string& config_path,
                      const PlanArgs& args) {
  autoloco::PlanOptions o;
  bool world = false;
  bool from_flops = false;
  for (const auto& [name, value] : args.values) {
    if (name == "--world") {
      o.world = autoloco::parse_plan_world(value, config);
      world = true;
    } else if (name == "--device-memory") {
      o.device_memory = autoloco::parse_byte_size(value, name);
      o.device_memory_text = value;
    } else if (name == "--step-time") {
      o.step_s = autoloco::parse_positive_number(value, name);
    } else if (name == "--mfu") {
      o.mfu = autoloco::parse_positive_number(value, name);
      from_flops = true;
    } else if (name == "--device-flops") {
      o.device_flops = autoloco::parse_positive_number(value, name);
      from_flops = true;
    }
  }
  if (!world) {
    throw autoloco::ConfigError(
        "--plan needs --world N: the ranks of the job planned for (a multiple of "
        "topology.ranks_per_dc)");
  }
  if (o.step_s > 0 && from_flops) {
    throw autoloco::ConfigError(
        "--step-time gives the step's seconds; --mfu and --device-flops derive them: give one "
        "or the other");
  }
  if (o.mfu > 1) throw autoloco::ConfigError("--mfu is a fraction of the peak, at most 1");
  return autoloco::plan_report(config, config_path, o);
}
