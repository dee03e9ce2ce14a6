// End to end: `autoloco-train CONFIG --plan --world N` without an MPI launch prints the memory
// table of the three shard modes (the planner's own figures, row by row), the sync on the link
// and the utilisation, and refuses a wrong --device-memory unit or --world naming the option.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/train/memory_plan.hpp"
#include "autoloco/train/plan_report.hpp"

using autoloco::test::contains;
using autoloco::test::read_text;
using autoloco::test::run_command;

namespace {

const std::string kConfig = std::string(AUTOLOCO_SOURCE_DIR) + "/configs/quickstart.yaml";

// Runs the planner with `args`; its exit code, and its stdout and stderr in `output`.
int plan(const std::string& dir, const std::string& args, std::string& output) {
  const std::string log = dir + "/plan.log";
  const std::string command =
      std::string(AUTOLOCO_TRAIN_EXE) + " " + kConfig + " --plan " + args + " > " + log + " 2>&1";
  INFO(command);
  const int code = run_command(command);
  output = read_text(log);
  return code;
}

// The line of the table that starts with `label` (after its indent), with its newline before.
std::string line_of(const std::string& text, const std::string& label) {
  const size_t newline = text.find("\n  " + label + " ");
  if (newline == std::string::npos) return "";
  const size_t at = newline + 1;
  return text.substr(at, text.find('\n', at) - at);
}

}  // namespace

TEST_CASE(
    "e2e: --plan prints the memory table of none, optimizer and gradients, the link and "
    "the utilisation",
    "[e2e][plan]") {
  const autoloco::test::TempDir tmp("e2e-plan");
  std::string out;
  REQUIRE(plan(tmp.str(), "--world 8 --set topology.ranks_per_dc=4 --device-memory 80GB", out) ==
          0);
  INFO(out);
  CHECK(contains(out, "world 8 = 2 dcs x 4 ranks"));
  CHECK(contains(out, "judged against --device-memory 80GB (74.51 GiB)"));
  const std::string header = line_of(out, "bytes per rank");
  CHECK(header.find("none") < header.find("optimizer"));
  CHECK(header.find("optimizer") < header.find("gradients"));

  // Every row holds the planner's figure for each mode, in the header's order.
  const autoloco::Config c = autoloco::load_config(kConfig, {"topology.ranks_per_dc=4"});
  std::vector<autoloco::MemoryClasses> plans;
  for (const std::string& mode : autoloco::plan_shard_modes())
    plans.push_back(autoloco::plan_memory(c, mode, 4, /*gpu=*/false, /*dcs=*/2));
  const std::vector<std::pair<std::string, int64_t autoloco::MemoryClasses::*>> rows = {
      {"parameters", &autoloco::MemoryClasses::parameters},
      {"gradients", &autoloco::MemoryClasses::gradients},
      {"optimizer", &autoloco::MemoryClasses::optimizer},
      {"outer_state", &autoloco::MemoryClasses::outer_state},
      {"residuals", &autoloco::MemoryClasses::residuals},
      {"buffers", &autoloco::MemoryClasses::buffers},
      {"activations (est.)", &autoloco::MemoryClasses::activations}};
  for (const auto& [label, field] : rows) {
    const std::string line = line_of(out, label);
    INFO(label << ": " << line);
    REQUIRE(!line.empty());
    size_t at = 0;
    for (const autoloco::MemoryClasses& m : plans) {
      const size_t next = line.find(autoloco::format_bytes(m.*field), at + 1);
      CHECK(next != std::string::npos);
      at = next;
    }
  }
  const std::string total = line_of(out, "total");
  size_t at = 0;
  for (const autoloco::MemoryClasses& m : plans) {
    const size_t next = total.find(autoloco::format_bytes(m.total()), at + 1);
    CHECK(next != std::string::npos);
    at = next;
  }
  // Sharding lowers the total; the quickstart's small model fits 80 GB in every mode.
  CHECK(plans[1].total() < plans[0].total());
  CHECK(plans[2].gradients < plans[1].gradients);
  const std::string fits = line_of(out, "fits (--device-memory)");
  CHECK(fits.find("does not fit") == std::string::npos);
  CHECK(fits.find("fits", fits.find(')')) != std::string::npos);
  // A CPU run keeps everything in host memory: no device row.
  CHECK(line_of(out, "on the device").empty());

  const autoloco::LinkPlan link = autoloco::plan_link(c, 8);
  CHECK(contains(out, "link: 2 dcs on 1 Gbit/s, 50 ms"));
  CHECK(contains(out, "each of 4 members all-reduces a shard of " +
                          std::to_string(link.shard_values) + " values + 12 scalars"));
  CHECK(contains(out, "(" + std::to_string(link.message_bytes) + " B)"));
  CHECK(contains(out, "utilisation at interval.H 20"));

  // 1 KB per device cannot hold the model.
  REQUIRE(plan(tmp.str(), "--world 8 --set topology.ranks_per_dc=4 --device-memory 1kB", out) == 0);
  CHECK(contains(line_of(out, "fits (--device-memory)"), "does not fit"));
}

TEST_CASE(
    "e2e: --plan refuses a wrong --device-memory unit and a --world that is no multiple "
    "of ranks_per_dc, naming the option",
    "[e2e][plan]") {
  const autoloco::test::TempDir tmp("e2e-plan");
  std::string out;
  CHECK(plan(tmp.str(), "--world 8 --set topology.ranks_per_dc=4 --device-memory 80GQ", out) != 0);
  CHECK(contains(out, "--device-memory '80GQ' is not a size"));
  CHECK(plan(tmp.str(), "--world 6 --set topology.ranks_per_dc=4", out) != 0);
  CHECK(contains(out, "--world '6' must be a positive multiple of topology.ranks_per_dc (4)"));
  CHECK(plan(tmp.str(), "--set topology.ranks_per_dc=4", out) != 0);
  CHECK(contains(out, "--plan needs --world N"));
  CHECK(run_command(std::string(AUTOLOCO_TRAIN_EXE) + " " + kConfig + " --world 8 > " + tmp.str() +
                    "/noplan.log 2>&1") != 0);
  CHECK(contains(read_text(tmp.str() + "/noplan.log"), "--world belongs to a plan"));
}
