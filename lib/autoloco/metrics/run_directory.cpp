#include "autoloco/metrics/run_directory.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"
#include "autoloco/util/log.hpp"

namespace autoloco {
namespace fs = std::filesystem;

RunDirectory::RunDirectory(std::string path) : path_(std::move(path)) {
  metrics_.open(path_ + "/metrics.jsonl", std::ios::app);
  syncs_.open(path_ + "/syncs.jsonl", std::ios::app);
  if (!metrics_ || !syncs_) {
    throw Error(fmt::format("cannot open files in run directory '{}'", path_));
  }
}

RunDirectory RunDirectory::create(const std::string& out_dir, const std::string& name) {
  const fs::path dir = fs::path(out_dir) / name;
  std::error_code ec;
  if (fs::exists(dir / "config.yaml") || fs::exists(dir / "metrics.jsonl")) {
    throw ConfigError(fmt::format(
        "run directory '{}' already holds a run: choose another run.name (--set run.name=...) "
        "or move the old run away; it is never overwritten",
        dir.string()));
  }
  fs::create_directories(dir, ec);
  if (ec) {
    throw ConfigError(
        fmt::format("config key run.out_dir: cannot create '{}': {}", dir.string(), ec.message()));
  }
  return RunDirectory(dir.string());
}

namespace {

// The integer after "key": in the last line of `lines` (whole lines only), or -1.
int64_t last_value(const std::string& lines, const std::string& key) {
  const size_t end = lines.empty() ? 0 : lines.size() - 1;
  const size_t begin = lines.rfind('\n', end == 0 ? 0 : end - 1);
  const std::string last = lines.substr(begin == std::string::npos ? 0 : begin + 1);
  const std::string needle = "\"" + key + "\":";
  const size_t at = last.find(needle);
  if (at == std::string::npos) return -1;
  return std::strtoll(last.c_str() + at + needle.size(), nullptr, 10);
}

void resize(const fs::path& file, int64_t bytes) {
  std::error_code ec;
  if (!fs::exists(file)) std::ofstream(file).close();
  fs::resize_file(file, static_cast<uintmax_t>(bytes), ec);
  if (ec) throw Error(fmt::format("cannot shorten '{}': {}", file.string(), ec.message()));
}

// `file` as the checkpoint of step `step` recorded it: longer, it is cut back (the lines after
// the checkpoint are written again); shorter, the node went down before the page cache reached
// the disk (logs before autoloco fsynced them at checkpoints, or another file system's
// promises): the run goes on from its last whole line and says which lines are gone.
void resume_log(const fs::path& file, int64_t recorded, int64_t step, const std::string& key) {
  if (recorded < 0) {
    throw CheckpointError(
        fmt::format("the checkpoint of step {} records {} bytes for '{}': it is damaged", step,
                    recorded, file.string()));
  }
  std::error_code ec;
  const int64_t size = fs::exists(file) ? static_cast<int64_t>(fs::file_size(file, ec)) : 0;
  if (ec) throw Error(fmt::format("cannot read the size of '{}': {}", file.string(), ec.message()));
  if (size >= recorded) {
    resize(file, recorded);
    return;
  }
  std::string text = read_file_bytes(file.string()).value_or(std::string());
  const size_t whole = text.rfind('\n');
  text.resize(whole == std::string::npos ? 0 : whole + 1);
  resize(file, static_cast<int64_t>(text.size()));
  const int64_t last = last_value(text, key);
  const std::string lost =
      last >= 0 ? fmt::format("its lines after {} {} up to the checkpoint are lost", key, last)
                : std::string("every line it had before the checkpoint is lost");
  log::warn(
      "{} came back with {} of the {} bytes that the checkpoint of step {} recorded (the node "
      "went down before they reached the disk): {}; the resumed run appends from step {} on",
      file.string(), size, recorded, step, lost, step);
}

}  // namespace

RunDirectory RunDirectory::reopen(const std::string& path, const LogSizes& recorded, int64_t step) {
  resume_log(fs::path(path) / "metrics.jsonl", recorded.metrics, step, "step");
  resume_log(fs::path(path) / "syncs.jsonl", recorded.syncs, step, "round");
  return RunDirectory(path);
}

std::string RunDirectory::set_aside_files(const std::string& path) {
  static const char* const kFiles[] = {"config.yaml", "metrics.jsonl", "syncs.jsonl",
                                       "segments.jsonl", "summary.json"};
  const fs::path dir(path);
  if (!fs::exists(dir / "config.yaml") && !fs::exists(dir / "metrics.jsonl")) return "";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
  fs::path target = dir / fmt::format("restarted-{}", stamp);
  for (int i = 1; fs::exists(target); ++i)
    target = dir / fmt::format("restarted-{}.{}", stamp, i);
  fs::create_directories(target);
  for (const char* name : kFiles) {
    if (fs::exists(dir / name)) fs::rename(dir / name, target / name);
  }
  return target.string();
}

LogSizes RunDirectory::durable_sizes() {
  const std::string metrics = path_ + "/metrics.jsonl";
  const std::string syncs = path_ + "/syncs.jsonl";
  // A CheckpointError: the checkpoint that asked fails cleanly on every rank.
  if (!metrics_.flush() || !syncs_.flush()) {
    throw CheckpointError(
        fmt::format("cannot write the logs of '{}'; check free disk space", path_));
  }
  try {
    fsync_file(metrics);
    fsync_file(syncs);
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
  return LogSizes{static_cast<int64_t>(fs::file_size(metrics)),
                  static_cast<int64_t>(fs::file_size(syncs))};
}

void RunDirectory::write_config(const std::string& yaml) const {
  write_file_durable(path_ + "/config.yaml", yaml);
}

void RunDirectory::append_metrics(const JsonObject& line) {
  metrics_ << line.str() << '\n';
  metrics_.flush();
}

void RunDirectory::append_sync(const JsonObject& line) {
  syncs_ << line.str() << '\n';
  syncs_.flush();
}

void RunDirectory::append_segment(const JsonObject& line) const {
  const std::string path = path_ + "/segments.jsonl";
  std::ofstream out(path, std::ios::app);
  out << line.str() << '\n';
  if (!out.flush()) {
    throw Error(fmt::format("cannot append to '{}'; check free disk space", path));
  }
}

void RunDirectory::write_summary(const JsonObject& summary) const {
  write_file_durable(path_ + "/summary.json", summary.str() + "\n");
}

}  // namespace autoloco
