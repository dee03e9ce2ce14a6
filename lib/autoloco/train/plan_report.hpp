// The text of `autoloco-train CONFIG --plan --world N ...` (docs/sharding.md "Planning
// memory"): the planner's figures (memory_plan.hpp) for the three shard modes side by side,
// judged against a device's memory, then the sync on the link and the compute utilisation it
// leaves. Also the parsing of the options' values, so that a wrong unit is refused naming the
// option before anything is computed.
#pragma once

#include <cstdint>
#include <string>

#include "autoloco/config/config.hpp"

namespace autoloco {

struct PlanOptions {
  int world = 0;                   // --world: ranks of the job planned for
  int64_t device_memory = 0;       // --device-memory in bytes; 0: not judged
  std::string device_memory_text;  // as given, for the report
  double step_s = 0.0;             // --step-time: compute seconds per inner step; 0: from FLOPs
  double mfu = 0.4;                // --mfu: the share of device_flops that training reaches
  double device_flops = 989e12;    // --device-flops: peak FLOP/s (an H100's dense bf16)
};

// "141GB", "80 GiB", "512MiB", "2TB", "1e9" (plain bytes): decimal GB/MB/TB/kB and binary
// GiB/MiB/TiB/KiB, case as written. Throws ConfigError naming `option` for anything else.
int64_t parse_byte_size(const std::string& text, const std::string& option);

// A positive number for `option` (--step-time, --mfu, --device-flops); throws ConfigError
// naming it otherwise.
double parse_positive_number(const std::string& text, const std::string& option);

// --world: a positive multiple of topology.ranks_per_dc; throws ConfigError naming both.
int parse_plan_world(const std::string& text, const Config& config);

// Binary units with three significant figures at least: "512 B", "3.22 MiB", "1.23 GiB".
std::string format_bytes(int64_t bytes);

// The report for `config` (loaded, a preset applied), titled with `config_path`.
std::string plan_report(const Config& config, const std::string& config_path,
                        const PlanOptions& options);

}  // namespace autoloco
