// autoloco-ckpt ls and verify: the table of a run's checkpoints (complete, in progress, set
// aside) with the quick or full check of each, and the full check of named checkpoints.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/util/error.hpp"
#include "ckpt_tool.hpp"

namespace autoloco::ckpt_tool {
namespace fs = std::filesystem;
namespace {

using Row = std::vector<std::string>;

// True when a file the manifest lists is not there.
bool missing_file(const std::string& dir, const CheckpointInfo& info) {
  if (!info.manifest) return false;
  std::error_code ec;
  for (const ManifestFile& f : info.manifest->files) {
    if (!fs::exists(fs::path(dir) / f.name, ec)) return true;
  }
  return false;
}

// The status of a checkpoint directory after the quick (or, with `full`, the full) check.
std::string check_status(const Entry& e, const CheckpointInfo& info, bool full) {
  std::string problem = info.problem;
  if (problem.empty() && full) problem = verify_checkpoint(e.path);
  std::string status;
  std::error_code ec;
  if (problem.empty()) {
    status = "valid";
  } else if (!fs::exists(fs::path(e.path) / kManifestFile, ec)) {
    status = "incomplete: no manifest.json";
  } else if (missing_file(e.path, info)) {
    status = "incomplete: " + relative_to(problem, e.path);
  } else {
    status = "damaged: " + relative_to(problem, e.path);
  }
  if (e.kind == EntryKind::set_aside) status += " (set aside by a resume; never read)";
  return status;
}

Row row_of(const Entry& e, bool full) {
  const std::string size = human_bytes(directory_bytes(e.path));
  const std::string step = e.step >= 0 ? std::to_string(e.step) : "?";
  if (e.kind == EntryKind::temporary) {
    return {e.name, step, "-", "-", "-", size, "incomplete (being written or abandoned)"};
  }
  if (e.kind == EntryKind::old) {
    return {e.name, step, "-", "-", "-", size, "old copy (being replaced or abandoned)"};
  }
  const CheckpointInfo info = inspect_checkpoint(e.path);
  Row row{e.name, step, "-", "-", "-", size, check_status(e, info, full)};
  if (info.manifest) {
    row[1] = std::to_string(info.manifest->step);
    row[2] = std::to_string(info.manifest->round);
    row[3] = info.manifest->reason;
    row[4] = info.manifest->created;
  }
  return row;
}

}  // namespace

int run_ls(const std::vector<std::string>& argv) {
  const Args args = Args::parse(argv, {}, {"--verify"});
  if (args.positional.size() != 1) {
    throw UsageError(
        "ls takes one PATH: a run directory, its checkpoints/ directory or one "
        "checkpoint");
  }
  const bool full = args.has("--verify");
  const Target target = resolve(args.positional[0]);
  if (target.entries.empty()) {
    fmt::print("no checkpoints in {}\n", target.dir);
    return 0;
  }
  if (!target.single) fmt::print("{}\n", target.dir);
  std::vector<Row> rows{{"name", "step", "round", "reason", "created", "size", "status"}};
  for (const Entry& e : target.entries)
    rows.push_back(row_of(e, full));
  print_table(rows);
  if (!full) {
    fmt::print(
        "(status: quick check of the manifest and file sizes; --verify checks every dataset's "
        "crc32)\n");
  }
  return 0;
}

int run_verify(const std::vector<std::string>& argv) {
  const Args args = Args::parse(argv, {}, {});
  if (args.positional.empty()) {
    throw UsageError("verify needs at least one PATH: a checkpoint or a run directory");
  }
  int failed = 0;
  const auto report = [&](const std::string& path, const std::string& problem) {
    if (problem.empty()) {
      const Manifest m = read_manifest(path);
      fmt::print("ok {} ({} files, {} bytes)\n", path, m.files.size(), m.total_bytes());
    } else {
      fmt::print("FAILED {}: {}\n", path, problem);
      ++failed;
    }
    std::fflush(stdout);
  };
  for (const std::string& path : args.positional) {
    Target target;
    try {
      target = resolve(path);
    } catch (const CheckpointError& e) {
      report(path, e.what());
      continue;
    }
    if (target.single) {
      const Entry& e = target.entries.front();
      if (e.kind == EntryKind::temporary || e.kind == EntryKind::old) {
        report(e.path, "incomplete: it is being written, or was abandoned by a job that died");
      } else {
        report(e.path, verify_checkpoint(e.path));
      }
      continue;
    }
    bool any = false;
    for (const Entry& e : target.entries) {
      if (e.kind != EntryKind::complete) continue;
      any = true;
      report(e.path, verify_checkpoint(e.path));
    }
    if (!any) report(target.dir, "no checkpoints (step_<N>) in it");
  }
  return failed == 0 ? 0 : kExitFailure;
}

}  // namespace autoloco::ckpt_tool
