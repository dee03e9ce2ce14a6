#include "autoloco/ckpt/checkpoint_dir.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "autoloco/ckpt/layout.hpp"
#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

std::optional<int64_t> step_of(const std::string& name) {
  static const std::regex pattern("step_([0-9]+)");
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

void remove_tree(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) {
    throw CheckpointError(fmt::format("cannot remove '{}': {}", path.string(), ec.message()));
  }
}

}  // namespace

CheckpointInfo inspect_checkpoint(const std::string& path) {
  CheckpointInfo info;
  info.path = path;
  info.step = step_of(fs::path(path).filename().string()).value_or(-1);
  try {
    info.manifest = read_manifest(path);
  } catch (const CheckpointError& e) {
    info.problem = e.what();
    return info;
  }
  const Manifest& m = *info.manifest;
  if (!readable_checkpoint_format(m.format_version)) {
    info.problem = fmt::format(
        "'{}' has checkpoint format {}; this autoloco reads formats {} to {}: resume it with the "
        "autoloco version that wrote it",
        path, m.format_version, kOldestCheckpointFormat, kCheckpointFormat);
    return info;
  }
  if (info.step < 0) info.step = m.step;
  for (const ManifestFile& f : m.files) {
    const fs::path file = fs::path(path) / f.name;
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec) {
      info.problem = fmt::format(
          "'{}' is missing: the manifest lists it, so the file was lost or removed after the "
          "checkpoint was written",
          file.string());
      return info;
    }
    if (static_cast<int64_t>(size) != f.size) {
      info.problem = fmt::format(
          "'{}' has {} bytes where the manifest says {}: it is truncated or "
          "damaged",
          file.string(), size, f.size);
      return info;
    }
  }
  return info;
}

std::vector<CheckpointInfo> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() || !step_of(entry.path().filename().string())) continue;
    out.push_back(inspect_checkpoint(entry.path().string()));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step > b.step; });
  return out;
}

std::string verify_checkpoint(const std::string& path) {
  const CheckpointInfo info = inspect_checkpoint(path);
  if (!info.ok()) return info.problem;
  for (const ManifestFile& f : info.manifest->files) {
    try {
      const H5Reader reader((fs::path(path) / f.name).string(), &f.datasets);
      const DatasetSums found = reader.sums();
      for (const auto& [name, sum] : found) {
        if (!f.datasets.count(name)) {
          return fmt::format("'{}/{}' has a dataset '{}' that the manifest does not list", path,
                             f.name, name);
        }
      }
      for (const auto& [name, sum] : f.datasets) {
        const auto it = found.find(name);
        if (it == found.end()) {
          return fmt::format("'{}/{}' has no dataset '{}' that the manifest lists", path, f.name,
                             name);
        }
        if (it->second.bytes != sum.bytes || it->second.crc != sum.crc) {
          return fmt::format(
              "'{}/{}': dataset '{}' has crc32 {:08x} over {} bytes where the manifest says "
              "{:08x} over {}: the file is corrupted",
              path, f.name, name, it->second.crc, it->second.bytes, sum.crc, sum.bytes);
        }
      }
    } catch (const CheckpointError& e) {
      return e.what();
    }
  }
  return "";
}

std::string begin_checkpoint(const std::string& dir, int64_t step) {
  const fs::path tmp = fs::path(dir) / (".tmp-" + checkpoint_name(step));
  remove_tree(tmp);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) {
    throw CheckpointError(
        fmt::format("cannot create checkpoint directory '{}': {}", tmp.string(), ec.message()));
  }
  return tmp.string();
}

std::string commit_checkpoint(const std::string& dir, const std::string& tmp, int64_t step) {
  const fs::path final_path = fs::path(dir) / checkpoint_name(step);
  try {
    if (fs::exists(final_path)) {
      // Same step, same state (runs are deterministic): swap it out, then drop the old copy.
      const fs::path old = fs::path(dir) / (".old-" + checkpoint_name(step));
      remove_tree(old);
      rename_durable(final_path.string(), old.string());
      rename_durable(tmp, final_path.string());
      remove_tree(old);
    } else {
      rename_durable(tmp, final_path.string());
    }
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
  return final_path.string();
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last,
                                           const std::string& protect) {
  std::vector<std::string> removed;
  int64_t kept = 0;
  for (const CheckpointInfo& c : list_checkpoints(dir)) {
    if (!c.ok()) continue;  // incomplete ones are left for the user to look at
    std::error_code ec;
    if (fs::equivalent(c.path, protect, ec) || kept < keep_last) {
      ++kept;
      continue;
    }
    remove_tree(c.path);
    removed.push_back(c.path);
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0 || name.rfind(".old-", 0) == 0) {
      remove_tree(entry.path());
      removed.push_back(entry.path().string());
    }
  }
  return removed;
}

std::string set_aside_checkpoint(const std::string& path, const std::string& prefix) {
  const fs::path p(path);
  fs::path target = p.parent_path() / (prefix + "-" + p.filename().string());
  for (int i = 1; fs::exists(target); ++i) {
    target = p.parent_path() / fmt::format("{}-{}.{}", prefix, p.filename().string(), i);
  }
  try {
    rename_durable(path, target.string());
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
  return target.string();
}

}  // namespace autoloco
