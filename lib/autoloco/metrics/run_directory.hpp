// The run directory <out_dir>/<name>/: effective config, metrics.jsonl, syncs.jsonl,
// segments.jsonl and summary.json. Only the rank that owns it (world rank 0) writes; files are
// appended line by line and flushed, so a crash of the process loses at most the line being
// written. A crash of the node can lose more (the page cache), so a checkpoint first makes the
// logs durable up to the sizes it records (durable_sizes), and a resume accepts logs that came
// back shorter than that, with a warning naming what was lost.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "autoloco/util/json.hpp"

namespace autoloco {

// The sizes of metrics.jsonl and syncs.jsonl, as a checkpoint records them.
struct LogSizes {
  int64_t metrics = 0;
  int64_t syncs = 0;
};

class RunDirectory {
 public:
  // Creates the directory. Refuses (ConfigError) to reuse one that already holds a run, so an
  // earlier run is never overwritten.
  static RunDirectory create(const std::string& out_dir, const std::string& name);

  // Continues the run in `path` from the checkpoint of step `step`: metrics.jsonl and
  // syncs.jsonl are cut back to the sizes it recorded (the lines after it are written again by
  // the resumed run). A file shorter than recorded (a node crashed before the page cache reached
  // the disk) is cut back to its last whole line and a warning names the lines lost; the run
  // goes on.
  static RunDirectory reopen(const std::string& path, const LogSizes& recorded, int64_t step);

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
  // Flushes metrics.jsonl and syncs.jsonl to the disk (fsync) and returns their sizes: what a
  // checkpoint records, so that no crash can leave them shorter than that.
  LogSizes durable_sizes();

 private:
  explicit RunDirectory(std::string path);
  std::string path_;
  std::ofstream metrics_;
  std::ofstream syncs_;
};

}  // namespace autoloco
