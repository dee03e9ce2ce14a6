// The planner's report (plan_report.hpp): option values, units, and the table.
#include "autoloco/train/plan_report.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "autoloco/model/model_specs.hpp"
#include "autoloco/train/memory_plan.hpp"
#include "autoloco/train/outer_sync.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

struct Unit {
  const char* name;
  double bytes;
};

// Decimal and binary units as storage and GPU vendors write them (an H200's 141 GB is
// decimal), so a size given either way means what the datasheet meant.
constexpr std::array<Unit, 9> kUnits = {{{"B", 1.0},
                                         {"kB", 1e3},
                                         {"MB", 1e6},
                                         {"GB", 1e9},
                                         {"TB", 1e12},
                                         {"KiB", 1024.0},
                                         {"MiB", 1048576.0},
                                         {"GiB", 1073741824.0},
                                         {"TiB", 1099511627776.0}}};

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// The whole text as a finite number, or false.
bool parse_number(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(value);
}

std::string fits(int64_t bytes, int64_t capacity) {
  return bytes <= capacity ? "fits" : "does not fit";
}

// One row of the memory table: a label, then one cell per shard mode.
std::string row(const std::string& label, const std::vector<std::string>& cells) {
  std::string line = fmt::format("  {:<22}", label);
  for (const std::string& cell : cells)
    line += fmt::format("{:>14}", cell);
  return line + "\n";
}

// FLOPs and FLOP/s in decimal prefixes up to peta (an accelerator's peak is hundreds of tera).
std::string si(double value) {
  static constexpr std::array<const char*, 6> kPrefixes = {"", "k", "M", "G", "T", "P"};
  size_t p = 0;
  while (std::fabs(value) >= 1000.0 && p + 1 < kPrefixes.size()) {
    value /= 1000.0;
    ++p;
  }
  return fmt::format("{:.4g} {}", value, kPrefixes[p]);
}

std::string human_and_exact(int64_t bytes) {
  return fmt::format("{} ({} B)", format_bytes(bytes), bytes);
}

std::string memory_table(const Config& c, const PlanOptions& o, int members, bool gpu) {
  // ddp keeps the unsharded path (validate.cpp refuses topology.shard with it).
  std::vector<std::string> modes = plan_shard_modes();
  if (c.outer.method == "ddp") modes.resize(1);
  std::vector<MemoryClasses> plans;
  for (const std::string& mode : modes)
    plans.push_back(plan_memory(c, mode, members, gpu, o.world / members));
  // The least a rank can hold: every state sharded and the blocks recomputed.
  if (c.outer.method != "ddp" && c.model.recompute == "none") {
    Config least = c;
    least.model.recompute = "blocks";
    modes.push_back("full+blocks");
    plans.push_back(plan_memory(least, "full", members, gpu, o.world / members));
  }
  auto cells = [&](int64_t MemoryClasses::*field) {
    std::vector<std::string> out;
    for (const MemoryClasses& m : plans)
      out.push_back(format_bytes(m.*field));
    return out;
  };
  std::string out = row("bytes per rank", modes);
  out += row("parameters", cells(&MemoryClasses::parameters));
  out += row("gradients", cells(&MemoryClasses::gradients));
  out += row("optimizer", cells(&MemoryClasses::optimizer));
  out += row("outer_state", cells(&MemoryClasses::outer_state));
  out += row("residuals", cells(&MemoryClasses::residuals));
  out += row("buffers", cells(&MemoryClasses::buffers));
  out += row("activations (est.)", cells(&MemoryClasses::activations));
  std::vector<std::string> total;
  std::vector<std::string> device;
  std::vector<std::string> verdict;
  for (const MemoryClasses& m : plans) {
    total.push_back(format_bytes(m.total()));
    device.push_back(format_bytes(m.device()));
    verdict.push_back(fits(m.device(), o.device_memory));
  }
  out += row("total", total);
  if (gpu) out += row("on the device", device);
  if (o.device_memory > 0) out += row("fits (--device-memory)", verdict);
  return out;
}

std::string compute_line(const Config& c, const PlanOptions& o, double& step_s) {
  if (o.step_s > 0) {
    step_s = o.step_s;
    return fmt::format("compute: {:.4g} s per inner step (--step-time)", step_s);
  }
  const double tokens =
      static_cast<double>(c.data.batch_size * c.data.grad_accum * c.model.seq_len);
  const double flops = flops_per_token(c.model);
  step_s = flops * tokens / (o.device_flops * o.mfu);
  return fmt::format(
      "compute: {:.4g} s per inner step = {}FLOP per token x {} tokens per rank per step / "
      "({:g} MFU x {}FLOP/s)",
      step_s, si(flops), static_cast<int64_t>(tokens), o.mfu, si(o.device_flops));
}

std::string link_lines(const Config& c, const PlanOptions& o) {
  const LinkPlan link = plan_link(c, o.world);
  const bool ddp = c.outer.method == "ddp";
  std::string out = fmt::format("link: {} dcs on {:g} Gbit/s, {:g} ms (wan.mode {}), wire {}\n",
                                link.dcs, c.wan.bandwidth_gbps, c.wan.latency_ms, c.wan.mode,
                                wire_codec(c.outer).describe());
  if (link.dcs <= 1) return out + "  one dc: nothing crosses the inter-dc link\n";
  const std::string what = ddp ? "one step's gradient all-reduce (ddp)"
                               : (link.syncs > 1 ? fmt::format("one of {} fragment syncs per "
                                                               "interval (outer.fragments)",
                                                               link.syncs)
                                                 : std::string("one sync"));
  out += fmt::format(
      "  {}: each of {} members all-reduces a shard of {} values{} across the {} dcs{}\n", what,
      link.members, link.shard_values,
      ddp ? "" : fmt::format(" + {} scalars", OuterSync::message_scalars(link.dcs)), link.dcs,
      link.pieces > 1 ? fmt::format(" in {} pieces of at most 1 GiB", link.pieces) : "");
  out += fmt::format("  message per dc {}, sent per dc {}, {:.4g} s on the modelled link\n",
                     human_and_exact(link.message_bytes), human_and_exact(link.sent_bytes),
                     link.seconds);
  return out;
}

std::string utilisation_line(const Config& c, const PlanOptions& o, double step_s) {
  const LinkPlan link = plan_link(c, o.world);
  if (c.outer.method == "ddp") {
    return fmt::format("utilisation (ddp: a sync every step, nothing overlapped): {:.4f}\n",
                       planned_utilisation(1, step_s, 1, link.seconds, 0));
  }
  const double u =
      planned_utilisation(c.interval.H, step_s, link.syncs, link.seconds, c.outer.overlap_steps);
  return fmt::format(
      "utilisation at interval.H {} (outer.overlap_steps {}, {} sync{} per interval): {:.4f} = "
      "H t / (H t + exposed link time)\n",
      c.interval.H, c.outer.overlap_steps, link.syncs, link.syncs > 1 ? "s" : "", u);
}

}  // namespace

int64_t parse_byte_size(const std::string& text, const std::string& option) {
  const std::string t = trim(text);
  size_t split = t.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(t[split - 1])))
    --split;
  const std::string number = trim(t.substr(0, split));
  const std::string unit = t.substr(split);
  double value = 0.0;
  double scale = unit.empty() ? 1.0 : 0.0;
  for (const Unit& u : kUnits)
    if (unit == u.name) scale = u.bytes;
  if (!parse_number(number, value) || scale == 0.0 || value <= 0 || value * scale > 9e18) {
    throw ConfigError(option + " '" + text +
                      "' is not a size: give a positive number of bytes with an optional unit "
                      "B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of "
                      "1024), e.g. " +
                      option + " 141GB");
  }
  return static_cast<int64_t>(std::llround(value * scale));
}

double parse_positive_number(const std::string& text, const std::string& option) {
  double value = 0.0;
  if (!parse_number(trim(text), value) || value <= 0) {
    throw ConfigError(option + " '" + text + "' is not a positive number");
  }
  return value;
}

int parse_plan_world(const std::string& text, const Config& config) {
  double value = 0.0;
  const int64_t members = config.topology.ranks_per_dc;
  if (!parse_number(trim(text), value) || value < 1 || value != std::floor(value) || value > 1e9 ||
      static_cast<int64_t>(value) % members != 0) {
    throw ConfigError(fmt::format(
        "--world '{}' must be a positive multiple of topology.ranks_per_dc ({}): the ranks of "
        "the job planned for, {} per dc",
        text, members, members));
  }
  return static_cast<int>(value);
}

std::string format_bytes(int64_t bytes) {
  static constexpr std::array<const char*, 5> kNames = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", value, value >= 100 ? 1 : 2, kNames[unit]);
}

std::string plan_report(const Config& c, const std::string& config_path, const PlanOptions& o) {
  const int members = static_cast<int>(c.topology.ranks_per_dc);
  const bool gpu = c.run.device == "cuda";
  const ModelConfig& m = c.model;
  const int64_t P = parameter_count(m);
  std::string out = fmt::format(
      "plan of {}: world {} = {} dcs x {} ranks | {}{} model, {} parameters ({} fp32) | {}, {} | "
      "{}, inner {}\n",
      config_path, o.world, o.world / members, members, m.arch,
      m.preset.empty() ? "" : fmt::format(" (preset {})", m.preset), P, format_bytes(4 * P),
      c.run.device,
      c.run.precision == "bf16" || (c.run.precision == "auto" && gpu) ? "bf16 activations"
                                                                      : "fp32 activations",
      c.outer.method, c.inner.optimizer);
  if (o.device_memory > 0) {
    out += fmt::format("  judged against --device-memory {} ({}) per {}\n", o.device_memory_text,
                       format_bytes(o.device_memory),
                       gpu ? "device" : "rank (run.device cpu: host memory)");
  }
  out += memory_table(c, o, members, gpu);
  out += fmt::format(
      "  (est.): Korthikanti et al. 2022, one micro-batch of {} x {} tokens over {} layers, "
      "model.recompute {}{}; docs/sharding.md\n",
      c.data.batch_size, m.seq_len, m.n_layer, m.recompute,
      m.recompute == "none" && c.outer.method != "ddp"
          ? " (full+blocks: topology.shard full with model.recompute blocks)"
          : "");
  if (gpu) {
    out +=
        "  on the device: the total less the host's share (host staging, residuals, and the "
        "outer state where outer.state_device keeps it on the cpu)\n";
  }
  out += link_lines(c, o);
  double step_s = 0.0;
  out += compute_line(c, o, step_s) + "\n";
  out += utilisation_line(c, o, step_s);
  return out;
}

}  // namespace autoloco
