#include "autoloco/metrics/run_directory.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace fs = std::filesystem;

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw Error(fmt::format("cannot write '{}': check space and permissions", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, ec.message()));
}

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

void RunDirectory::write_config(const std::string& yaml) const {
  write_file_atomic(path_ + "/config.yaml", yaml);
}

void RunDirectory::append_metrics(const JsonObject& line) {
  metrics_ << line.str() << '\n';
  metrics_.flush();
}

void RunDirectory::append_sync(const JsonObject& line) {
  syncs_ << line.str() << '\n';
  syncs_.flush();
}

void RunDirectory::write_summary(const JsonObject& summary) const {
  write_file_atomic(path_ + "/summary.json", summary.str() + "\n");
}

}  // namespace autoloco
