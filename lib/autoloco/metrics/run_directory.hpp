// The run directory <out_dir>/<name>/: effective config, metrics.jsonl, syncs.jsonl,
// segments.jsonl and summary.json. Only the rank that owns it (world rank 0) writes; files are
// appended line by line and flushed so a crash loses at most the line being written.
#pragma once

#include <fstream>
#include <string>

#include "autoloco/util/json.hpp"

namespace autoloco {

class RunDirectory {
 public:
  // Creates the directory. Refuses (ConfigError) to reuse one that already holds a run, so an
  // earlier run is never overwritten.
  static RunDirectory create(const std::string& out_dir, const std::string& name);

  // Continues the run in `path` from a checkpoint: metrics.jsonl and syncs.jsonl are cut back to
  // the sizes they had when it was written (the lines after it are written again by the resumed
  // run). Throws CheckpointError when a file is shorter than that.
  static RunDirectory reopen(const std::string& path, int64_t metrics_bytes, int64_t syncs_bytes);

  // Moves the files of a run that never wrote a checkpoint into <path>/restarted-<time>/, so a
  // new start in the same directory damages nothing. Returns the new folder, or "" if the
  // directory holds no run.
  static std::string set_aside_files(const std::string& path);

  const std::string& path() const { return path_; }
  void write_config(const std::string& yaml) const;
  void append_metrics(const JsonObject& line);
  void append_sync(const JsonObject& line);
  // One line per start of the run, fresh or resumed (segments.jsonl): never cut back on a
  // resume, so it keeps the history of every job segment that ran in this directory.
  void append_segment(const JsonObject& line) const;
  // Written to a temporary file and renamed, so a reader never sees half a summary.
  void write_summary(const JsonObject& summary) const;
  // Bytes written so far to metrics.jsonl and syncs.jsonl (kept in checkpoints).
  // (Every line is flushed when written, so the files' sizes are these counts.)
  int64_t metrics_bytes() const;
  int64_t syncs_bytes() const;

 private:
  explicit RunDirectory(std::string path);
  std::string path_;
  std::ofstream metrics_;
  std::ofstream syncs_;
};

}  // namespace autoloco
