#include "autoloco/ckpt/manifest.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <ctime>
#include <fstream>
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

// yaml-cpp reads JSON (a subset of YAML's flow style).
ManifestFile file_from(const YAML::Node& n, const std::string& origin) {
  ManifestFile f;
  f.name = n["name"].as<std::string>();
  f.size = n["size"].as<int64_t>();
  for (const auto& entry : n["datasets"]) {
    DatasetSum sum;
    sum.bytes = entry.second["bytes"].as<int64_t>();
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
    for (const auto& f : root["files"])
      m.files.push_back(file_from(f, origin));
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
