// The model a checkpoint holds (the anchor, or a dc's replica), read and checked once for the
// commands that hand it to other tools: export (HDF5 or Hugging Face) and logits. The anchor is
// global.h5's outer/anchor, or, in a checkpoint of a sharded run, assembled from the pieces its
// dc 0's rank files hold (ckpt/flat_pieces.hpp); a fully sharded run's replica likewise from
// its dc's.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/checkpoint_readers.hpp"
#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/util/error.hpp"
#include "ckpt_tool.hpp"

namespace autoloco::ckpt_tool {
namespace {

const ManifestFile& listed(const Manifest& m, const std::string& ckpt, const std::string& name) {
  const ManifestFile* f = m.find(name);
  if (!f) {
    throw CheckpointError(
        fmt::format("'{}' has no {} (its manifest does not list it){}", ckpt, name,
                    name == kGlobalFile ? "" : ": --replica takes a dc of the run that wrote it"));
  }
  return *f;
}

void check_parameters(const CheckpointModel& m, const std::string& global) {
  const auto numel = static_cast<int64_t>(m.values.size());
  for (const Param& p : m.params) {
    if (p.offset < 0 || p.offset + p.numel > numel) {
      throw CheckpointError(fmt::format(
          "{}: parameter '{}' ends at {}, past model/numel {}: the checkpoint is damaged", global,
          p.name, p.offset + p.numel, numel));
    }
  }
}

// Vector `name` of `numel` values from the pieces of it in dc `dc`'s rank files (a sharded run
// writes the anchor so in dc 0's, and a fully sharded one each dc's replica), read against the
// manifest's sums; false when no rank file of the dc holds a piece of it. Throws CheckpointError
// when the pieces leave an element out or name one past `numel`.
bool assemble(CheckpointReaders& files, const Manifest& m, const H5Reader& global,
              const std::string& name, int64_t dc, int64_t numel, CheckpointModel& out) {
  if (!global.has("topology/ranks_per_dc")) return false;
  const int64_t members = global.read_int("topology/ranks_per_dc");
  FlatPieces vector(name, numel);
  int64_t holding = 0;
  for (int64_t r = dc * members; r < (dc + 1) * members && r <= std::numeric_limits<int>::max();
       ++r) {
    const std::string file = rank_file(static_cast<int>(r));
    if (!m.find(file)) continue;
    const H5Reader& reader = files.open(file);
    if (!reader.has(piece_ranges_name(name))) continue;
    vector.add(reader, {});
    ++holding;
  }
  if (!vector.found()) return false;
  out.values.assign(static_cast<size_t>(numel), 0.0f);
  vector.read_into(out.values.data(), {FlatRange{0, numel}});
  // The anchor is every dc's; a replica is its dc's.
  const std::string whose = name == "outer/anchor" ? "" : fmt::format(" of dc {}", dc);
  out.source =
      fmt::format("{}: {}{} (assembled from {} rank files)", files.path(), name, whose, holding);
  return true;
}

}  // namespace

int64_t parse_replica(const Args& args) {
  if (!args.has("--replica")) return -1;
  const int64_t replica = parse_count("--replica", *args.value("--replica"));
  if (replica > std::numeric_limits<int>::max()) {
    throw UsageError(fmt::format("--replica {} is not a dc number", replica));
  }
  return replica;
}

CheckpointModel read_checkpoint_model(const std::string& ckpt_arg, int64_t replica,
                                      const std::string& command) {
  const Target t = resolve(ckpt_arg);
  if (!t.single) {
    throw UsageError(fmt::format(
        "{} takes one checkpoint, and '{}' is a directory of checkpoints: name one of them "
        "(e.g. {}/step_<N>; 'autoloco-ckpt ls {}' lists them)",
        command, ckpt_arg, t.dir, ckpt_arg));
  }
  const std::string& ckpt = t.dir;
  const CheckpointInfo info = inspect_checkpoint(ckpt);
  if (!info.ok()) {
    throw CheckpointError(fmt::format("cannot {} '{}': {}", command, ckpt, info.problem));
  }
  const Manifest& m = *info.manifest;

  // The model, the step and the config come from global.h5, read against the manifest's sums.
  CheckpointReaders files(ckpt, m);
  listed(m, ckpt, kGlobalFile);
  const H5Reader& global = files.open(kGlobalFile);
  CheckpointModel out;
  out.params = parse_parameters(global.read_string("model/parameters"), global.path());
  const int64_t numel = global.read_int("model/numel");
  out.step = global.read_int("counters/step");
  out.config = global.read_string("config");
  if (replica < 0 && global.has("outer/anchor")) {
    out.values = global.read_f32("outer/anchor");
    out.source = fmt::format("{}:outer/anchor", global.path());
  } else if (replica < 0 && assemble(files, m, global, "outer/anchor", 0, numel, out)) {
    // A sharded run's anchor, whole.
  } else {
    const int64_t d = std::max<int64_t>(replica, 0);
    const std::string name = dc_file(static_cast<int>(d));
    listed(m, ckpt, name);
    const H5Reader& dc = files.open(name);
    if (dc.has("replica/values")) {
      out.values = dc.read_f32("replica/values");
      out.source = fmt::format("{}:replica/values", dc.path());
    } else if (!assemble(files, m, global, "replica/values", d, numel, out)) {
      throw CheckpointError(fmt::format(
          "'{}' has no replica/values, and no rank file of dc {} holds a piece of it: the "
          "checkpoint is damaged",
          dc.path(), d));
    }
  }
  if (static_cast<int64_t>(out.values.size()) != numel) {
    throw CheckpointError(
        fmt::format("'{}' holds {} values where model/numel says {}: the checkpoint is damaged",
                    out.source, out.values.size(), numel));
  }
  check_parameters(out, global.path());
  return out;
}

ModelConfig CheckpointModel::model_config() const {
  return parse_config(config, {}, source + " (the run's config)").model;
}

}  // namespace autoloco::ckpt_tool
