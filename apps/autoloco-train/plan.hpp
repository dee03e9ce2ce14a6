// autoloco-train --plan: the plan's options as the command line gives them, checked and turned
// into the planner's report (lib/autoloco/train/plan_report.hpp). No Trainer, no MPI traffic.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autoloco/config/config.hpp"

// --world, --device-memory, --step-time, --mfu, --device-flops with their values, in order.
struct PlanArgs {
  std::vector<std::pair<std::string, std::string>> values;
};

bool is_plan_option(const std::string& arg);

// The report; throws ConfigError naming the option whose value is wrong or missing.
std::string plan_text(const autoloco::Config& config, const std::string& config_path,
                      const PlanArgs& args);
