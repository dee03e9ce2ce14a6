#include "autoloco/metrics/run_directory.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <ctime>
#include <filesystem>

#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"

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

void cut_back(const fs::path& file, int64_t bytes) {
  std::error_code ec;
  const auto size = fs::exists(file) ? static_cast<int64_t>(fs::file_size(file, ec)) : 0;
  if (ec || size < bytes) {
    throw CheckpointError(fmt::format(
        "'{}' has {} bytes but the checkpoint was written when it had {}: the run directory does "
        "not belong to this checkpoint; resume into a new run (another run.name)",
        file.string(), size, bytes));
  }
  fs::resize_file(file, static_cast<uintmax_t>(bytes), ec);
  if (ec) throw Error(fmt::format("cannot shorten '{}': {}", file.string(), ec.message()));
}

}  // namespace

RunDirectory RunDirectory::reopen(const std::string& path, int64_t metrics_bytes,
                                  int64_t syncs_bytes) {
  cut_back(fs::path(path) / "metrics.jsonl", metrics_bytes);
  cut_back(fs::path(path) / "syncs.jsonl", syncs_bytes);
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

int64_t RunDirectory::metrics_bytes() const {
  return static_cast<int64_t>(fs::file_size(fs::path(path_) / "metrics.jsonl"));
}

int64_t RunDirectory::syncs_bytes() const {
  return static_cast<int64_t>(fs::file_size(fs::path(path_) / "syncs.jsonl"));
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
