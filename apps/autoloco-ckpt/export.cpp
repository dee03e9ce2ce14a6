// autoloco-ckpt export: writes a checkpoint's parameters as a standalone HDF5 file, one float32
// dataset per parameter with its real shape (from the anchor, or a dc's replica), plus `step`
// and `config`, for tools that know nothing of autoloco's flat layout.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/util/error.hpp"
#include "ckpt_tool.hpp"

namespace autoloco::ckpt_tool {
namespace fs = std::filesystem;
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

}  // namespace

int run_export(const std::vector<std::string>& argv) {
  const Args args = Args::parse(argv, {"--replica"}, {});
  if (args.positional.size() != 2) throw UsageError("export takes a checkpoint and OUT.h5");
  const std::string& ckpt_arg = args.positional[0];
  const std::string& out = args.positional[1];
  // -1: no --replica (the anchor where the run has one, else dc 0).
  const int64_t replica =
      args.has("--replica") ? parse_count("--replica", *args.value("--replica")) : -1;
  if (replica > std::numeric_limits<int>::max()) {
    throw UsageError(fmt::format("--replica {} is not a dc number", replica));
  }

  const Target t = resolve(ckpt_arg);
  if (!t.single) {
    throw UsageError(fmt::format(
        "export takes one checkpoint, and '{}' is a directory of checkpoints: name one of them "
        "(e.g. {}/step_<N>; 'autoloco-ckpt ls {}' lists them)",
        ckpt_arg, t.dir, ckpt_arg));
  }
  const std::string& ckpt = t.dir;
  std::error_code ec;
  if (fs::exists(out, ec) || fs::is_symlink(out, ec)) {
    throw CheckpointError(
        fmt::format("'{}' exists: export never writes over a file; remove it or choose another "
                    "name",
                    out));
  }
  const CheckpointInfo info = inspect_checkpoint(ckpt);
  if (!info.ok()) throw CheckpointError(fmt::format("cannot export '{}': {}", ckpt, info.problem));
  const Manifest& m = *info.manifest;

  // The model, the step and the config come from global.h5, read against the manifest's sums.
  const H5Reader global(ckpt + "/" + kGlobalFile, &listed(m, ckpt, kGlobalFile).datasets);
  const std::string table = global.read_string("model/parameters");
  const std::vector<Param> params = parse_parameters(table, global.path());
  const int64_t numel = global.read_int("model/numel");
  const int64_t step = global.read_int("counters/step");
  const std::string config = global.read_string("config");

  std::vector<float> values;
  std::string source;
  if (replica < 0 && global.has("outer/anchor")) {
    values = global.read_f32("outer/anchor");
    source = fmt::format("{}:outer/anchor", global.path());
  } else {
    const std::string name = dc_file(static_cast<int>(std::max<int64_t>(replica, 0)));
    const H5Reader dc(ckpt + "/" + name, &listed(m, ckpt, name).datasets);
    values = dc.read_f32("replica/values");
    source = fmt::format("{}:replica/values", dc.path());
  }
  if (static_cast<int64_t>(values.size()) != numel) {
    throw CheckpointError(
        fmt::format("'{}' holds {} values where model/numel says {}: the "
                    "checkpoint is damaged",
                    source, values.size(), numel));
  }
  for (const Param& p : params) {
    if (p.offset + p.numel > numel) {
      throw CheckpointError(fmt::format(
          "{}: parameter '{}' ends at {}, past model/numel {}: the checkpoint is damaged",
          global.path(), p.name, p.offset + p.numel, numel));
    }
    if (p.name == "step" || p.name == "config") {
      throw CheckpointError(
          fmt::format("{}: a parameter is named '{}', which export keeps for its own dataset",
                      global.path(), p.name));
    }
  }

  // H5Writer refuses an existing file; once it has created OUT, a failure removes it again.
  H5Writer w(out);
  try {
    for (const Param& p : params)
      w.write(p.name, values.data() + p.offset, p.shape);
    w.write("step", step);
    w.write("config", config);
    w.close();
  } catch (...) {
    fs::remove(out, ec);
    throw;
  }
  fmt::print("wrote {}: {} parameters ({} float32 values) from {}, step {}\n", out, params.size(),
             numel, source, step);
  for (const Param& p : params)
    fmt::print("  {} [{}]\n", p.name, fmt::join(p.shape, ","));
  fmt::print("  step (int64), config (string)\n");
  return 0;
}

}  // namespace autoloco::ckpt_tool
