// autoloco-ckpt's shared pieces: the errors that pick the exit code, command-line splitting, where
// a PATH argument points (a run, its checkpoints/ directory or one checkpoint), the model's
// parameter table, reading any dataset of a checkpoint file, and the four commands.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/manifest.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/model/safetensors.hpp"

namespace autoloco::ckpt_tool {

// Exit codes: 0 success, 1 a checkpoint could not be read or a check failed, 2 a bad command
// line, 3 (diff) the two checkpoints hold different models.
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitModelsDiffer = 3;

// A bad command line (exit 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A command's arguments: positionals in order, and options ("--top 5" or "--top=5").
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // flag, value ("" for switches)

  // `with_value`: the options that take a value; `switches`: those that take none.
  static Args parse(const std::vector<std::string>& argv,
                    const std::vector<std::string>& with_value,
                    const std::vector<std::string>& switches);
  bool has(const std::string& flag) const;
  std::optional<std::string> value(const std::string& flag) const;
};

// Parses a non-negative integer given to `flag`; UsageError otherwise.
int64_t parse_count(const std::string& flag, const std::string& text);

// What a directory under checkpoints/ is, from its name.
enum class EntryKind {
  complete,   // step_<N>
  temporary,  // .tmp-step_<N>: being written, or left by a job that died while writing
  old,        // .old-step_<N>: the copy a re-commit of the same step is replacing
  set_aside,  // rejected-step_<N>[.k], superseded-step_<N>[.k]: set aside by a resume
};

struct Entry {
  std::string path;
  std::string name;
  EntryKind kind = EntryKind::complete;
  int64_t step = 0;
};

// The entry that a directory name denotes, or nothing when it is not a checkpoint's name.
std::optional<Entry> entry_of(const std::string& path);

// What a PATH argument denotes.
struct Target {
  bool single = false;         // one checkpoint (`entries` holds it)
  std::string dir;             // the checkpoints/ directory, or the checkpoint itself
  std::vector<Entry> entries;  // newest first
};

// Resolves a run directory, a checkpoints/ directory or one checkpoint. Throws
// CheckpointError naming `path` when it is none of them.
Target resolve(const std::string& path);

// One line of model/parameters: "name [d0,d1] offset".
struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 1;
};

// Parses model/parameters; `origin` names the file in errors.
std::vector<Param> parse_parameters(const std::string& table, const std::string& origin);

// "812B", "1.2kB", "1.2MB", "3.4GB".
std::string human_bytes(int64_t bytes);

// Bytes of the regular files directly in `dir`.
int64_t directory_bytes(const std::string& dir);

// Prints rows as columns padded to their widest cell (the last one is not padded).
void print_table(const std::vector<std::vector<std::string>>& rows, const std::string& indent = "");

// Removes "<dir>/" from a message that names files inside `dir`, for tables that name it once.
std::string relative_to(const std::string& message, const std::string& dir);

// One dataset read back whole, in the type the file stores.
struct Dataset {
  enum class Type { f32, f64, i64, u8, text, empty, unknown };
  Type type = Type::unknown;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<int64_t> i64;
  std::vector<uint8_t> u8;
  std::string text;
  DatasetSum sum;  // of the bytes in the file
};

// Reads dataset `name` of `reader` (whose file bytes have the manifest's sum `sum`). A reader
// opened with the manifest's sums checks them and throws CheckpointError on a mismatch.
Dataset load_dataset(const H5Reader& reader, const std::string& name, const DatasetSum& sum);

// The model of a checkpoint: its parameter table, the flat float32 values (the anchor, or a
// dc's replica), the step and the run's config (YAML text).
struct CheckpointModel {
  std::vector<Param> params;
  std::vector<float> values;
  int64_t step = 0;
  std::string config;
  std::string source;  // "FILE:DATASET" the values came from

  // The run's model keys, from its config. Throws ConfigError naming the source.
  ModelConfig model_config() const;
};

// The parameters as named CPU tensors viewing m.values (valid while `m` lives).
NamedTensors named_tensors(const CheckpointModel& m);

// --replica DC, or -1 without it.
int64_t parse_replica(const Args& args);

// Reads and checks the model of checkpoint `ckpt` (the anchor when `replica` < 0 and the run has
// one, else dc max(replica, 0)'s replica). `command` names the command in errors. Throws
// UsageError for a directory of checkpoints, CheckpointError for one that cannot be read.
CheckpointModel read_checkpoint_model(const std::string& ckpt, int64_t replica,
                                      const std::string& command);

// The commands; each returns the exit code. `argv` holds the command's own arguments.
int run_ls(const std::vector<std::string>& argv);
int run_verify(const std::vector<std::string>& argv);
int run_diff(const std::vector<std::string>& argv);
int run_export(const std::vector<std::string>& argv);
int run_logits(const std::vector<std::string>& argv);

}  // namespace autoloco::ckpt_tool
