#include "autoloco/ckpt/manifest.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "autoloco/ckpt/layout.hpp"
#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {
namespace {

JsonObject file_json(const ManifestFile& f) {
  JsonObject sets;
  for (const auto& [name, sum] : f.datasets) {
    sets.add(name,
             JsonObject().add("bytes", sum.bytes).add("crc32", fmt::format("{:08x}", sum.crc)));
  }
  return JsonObject().add("name", f.name).add("size", f.size).add("datasets", sets);
}

// A file of a checkpoint lies in its directory: a name that leads elsewhere ("/etc/passwd",
// "../x.h5", "a/b.h5") would make the checks and readers open a file of another directory.
void check_file_name(const std::string& name, const std::string& origin) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw CheckpointError(fmt::format(
        "{}: lists the file '{}', which is not a plain file name in the checkpoint's directory: "
        "the manifest is damaged; use another checkpoint",
        origin, name));
  }
}

// Sizes are counts of bytes: a negative one is damage, never a file autoloco wrote.
int64_t byte_count(const YAML::Node& n, const std::string& what, const std::string& origin) {
  const auto bytes = n.as<int64_t>();
  if (bytes < 0) {
    throw CheckpointError(
        fmt::format("{}: {} is {} bytes: the manifest is damaged; use another checkpoint", origin,
                    what, bytes));
  }
  return bytes;
}

// yaml-cpp reads JSON (a subset of YAML's flow style).
ManifestFile file_from(const YAML::Node& n, const std::string& origin) {
  ManifestFile f;
  f.name = n["name"].as<std::string>();
  check_file_name(f.name, origin);
  f.size = byte_count(n["size"], fmt::format("the size of '{}'", f.name), origin);
  for (const auto& entry : n["datasets"]) {
    DatasetSum sum;
    sum.bytes = byte_count(
        entry.second["bytes"],
        fmt::format("dataset '{}' of '{}'", entry.first.as<std::string>(), f.name), origin);
    const std::string hex = entry.second["crc32"].as<std::string>();
    size_t used = 0;
    sum.crc = static_cast<uint32_t>(std::stoul(hex, &used, 16));
    if (used != hex.size()) throw CheckpointError(origin + ": bad crc32 '" + hex + "'");
    f.datasets[entry.first.as<std::string>()] = sum;
  }
  return f;
}

template <class F>
auto parse_or_throw(const std::string& text, const std::string& origin, F&& f) {
  try {
    return f(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    throw CheckpointError(
        fmt::format("{}: not a valid manifest ({}): the checkpoint is incomplete or damaged",
                    origin, e.what()));
  } catch (const std::logic_error& e) {  // stoul
    throw CheckpointError(fmt::format("{}: not a valid manifest ({})", origin, e.what()));
  }
}

}  // namespace

std::string ManifestFile::to_json() const {
  return file_json(*this).str();
}

const ManifestFile* Manifest::find(const std::string& name) const {
  for (const auto& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

int64_t Manifest::total_bytes() const {
  int64_t total = 0;
  for (const auto& f : files)
    total += f.size;
  return total;
}

std::string Manifest::to_json() const {
  std::vector<JsonObject> entries;
  for (const auto& f : files)
    entries.push_back(file_json(f));
  return JsonObject()
             .add("format_version", format_version)
             .add("step", step)
             .add("round", round)
             .add("reason", reason)
             .add("created", created)
             .add("files", entries)
             .str() +
         "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& origin) {
  return parse_or_throw(text, origin, [&](const YAML::Node& root) {
    Manifest m;
    m.format_version = root["format_version"].as<int64_t>();
    m.step = root["step"].as<int64_t>();
    m.round = root["round"].as<int64_t>();
    m.reason = root["reason"].as<std::string>();
    m.created = root["created"].as<std::string>();
    std::set<std::string> names;
    for (const auto& f : root["files"]) {
      m.files.push_back(file_from(f, origin));
      if (!names.insert(m.files.back().name).second) {
        throw CheckpointError(fmt::format(
            "{}: lists the file '{}' twice: the manifest is damaged; use another checkpoint",
            origin, m.files.back().name));
      }
    }
    return m;
  });
}

ManifestFile parse_manifest_file(const std::string& text, const std::string& origin) {
  return parse_or_throw(text, origin,
                        [&](const YAML::Node& root) { return file_from(root, origin); });
}

Manifest read_manifest(const std::string& dir) {
  const std::string path = dir + "/" + kManifestFile;
  std::ifstream in(path);
  if (!in) {
    throw CheckpointError(fmt::format(
        "'{}' is missing: the checkpoint was not completed (the job stopped while writing it)",
        path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_manifest(text.str(), path);
}

void write_manifest(const std::string& dir, const Manifest& manifest) {
  try {
    write_file_durable(dir + "/" + kManifestFile, manifest.to_json());
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace autoloco
