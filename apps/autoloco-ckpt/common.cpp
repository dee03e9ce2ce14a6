// autoloco-ckpt's shared helpers: argument splitting, resolving PATH arguments to checkpoints,
// the parameter table, byte counts, and reading a dataset whose type the manifest's CRC-32 tells.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include "autoloco/ckpt/layout.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/error.hpp"
#include "ckpt_tool.hpp"

namespace autoloco::ckpt_tool {
namespace fs = std::filesystem;

Args Args::parse(const std::vector<std::string>& argv, const std::vector<std::string>& with_value,
                 const std::vector<std::string>& switches) {
  const auto known = [](const std::vector<std::string>& list, const std::string& flag) {
    return std::find(list.begin(), list.end(), flag) != list.end();
  };
  Args args;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      args.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    if (known(with_value, flag)) {
      if (eq != std::string::npos) {
        args.options.emplace_back(flag, arg.substr(eq + 1));
      } else if (i + 1 < argv.size()) {
        args.options.emplace_back(flag, argv[++i]);
      } else {
        throw UsageError(fmt::format("{} needs a value", flag));
      }
    } else if (known(switches, flag)) {
      if (eq != std::string::npos) throw UsageError(fmt::format("{} takes no value", flag));
      args.options.emplace_back(flag, "");
    } else {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    }
  }
  return args;
}

bool Args::has(const std::string& flag) const {
  return value(flag).has_value();
}

std::optional<std::string> Args::value(const std::string& flag) const {
  std::optional<std::string> found;
  for (const auto& [f, v] : options) {
    if (f == flag) found = v;  // the last one wins
  }
  return found;
}

int64_t parse_count(const std::string& flag, const std::string& text) {
  size_t used = 0;
  int64_t value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 0) {
    throw UsageError(fmt::format("{} expects a non-negative integer, got '{}'", flag, text));
  }
  return value;
}

std::optional<Entry> entry_of(const std::string& path) {
  static const std::regex pattern(
      R"(^(\.tmp-|\.old-|rejected-|superseded-)?step_([0-9]{1,18})(\.[0-9]{1,9})?$)");
  const std::string name = fs::path(path).filename().string();
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  const std::string prefix = m[1].str();
  Entry e;
  e.path = path;
  e.name = name;
  e.step = std::stoll(m[2].str());
  if (prefix.empty()) {
    e.kind = EntryKind::complete;
  } else if (prefix == ".tmp-") {
    e.kind = EntryKind::temporary;
  } else if (prefix == ".old-") {
    e.kind = EntryKind::old;
  } else {
    e.kind = EntryKind::set_aside;
  }
  // Only a set-aside name carries the ".k" of a name already taken.
  if (m[3].matched && e.kind != EntryKind::set_aside) return std::nullopt;
  return e;
}

namespace {

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Newest step first; at one step the complete checkpoint, then what is in progress, then the
// set-aside ones by name.
bool newer_first(const Entry& a, const Entry& b) {
  if (a.step != b.step) return a.step > b.step;
  if (a.kind != b.kind) return static_cast<int>(a.kind) < static_cast<int>(b.kind);
  return a.name < b.name;
}

std::vector<Entry> entries_in(const fs::path& dir) {
  std::vector<Entry> out;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    if (!is_dir(item.path())) continue;
    if (auto e = entry_of(item.path().string())) out.push_back(*e);
  }
  if (ec) {
    throw CheckpointError(fmt::format("cannot list '{}': {}", dir.string(), ec.message()));
  }
  std::sort(out.begin(), out.end(), newer_first);
  return out;
}

}  // namespace

Target resolve(const std::string& path) {
  std::string clean = path;
  while (clean.size() > 1 && clean.back() == '/')
    clean.pop_back();
  const fs::path p(clean);
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    throw CheckpointError(fmt::format(
        "'{}' does not exist: give a run directory, its checkpoints/ directory or one checkpoint "
        "(checkpoints/step_<N>)",
        path));
  }
  if (!is_dir(p)) {
    throw CheckpointError(fmt::format(
        "'{}' is not a directory: give a run directory, its checkpoints/ directory or one "
        "checkpoint (checkpoints/step_<N>)",
        path));
  }
  Target t;
  if (auto e = entry_of(clean)) {
    t.single = true;
    t.dir = clean;
    t.entries.push_back(*e);
    return t;
  }
  if (is_file(p / kManifestFile) || is_file(p / kGlobalFile)) {
    // A checkpoint copied under another name: its step is the manifest's.
    Entry e;
    e.path = clean;
    e.name = p.filename().string();
    try {
      e.step = read_manifest(clean).step;
    } catch (const CheckpointError&) {
      e.step = -1;
    }
    t.single = true;
    t.dir = clean;
    t.entries.push_back(e);
    return t;
  }
  if (is_dir(p / "checkpoints")) {
    t.dir = (p / "checkpoints").string();
  } else {
    t.dir = clean;
  }
  t.entries = entries_in(t.dir);
  if (t.entries.empty() && p.filename() != "checkpoints" && !is_dir(p / "checkpoints")) {
    throw CheckpointError(fmt::format(
        "'{}' is not a run directory, a checkpoints/ directory or a checkpoint: it holds no "
        "checkpoints/, step_<N>/ or manifest.json",
        path));
  }
  return t;
}

std::vector<Param> parse_parameters(const std::string& table, const std::string& origin) {
  std::vector<Param> out;
  std::istringstream lines(table);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.empty()) continue;
    const auto bad = [&]() {
      return CheckpointError(
          fmt::format("{}: line {} of model/parameters is not 'name [shape] offset': '{}'", origin,
                      number, line));
    };
    const size_t open = line.rfind(" [");
    const size_t close = line.rfind("] ");
    if (open == std::string::npos || close == std::string::npos || close < open || open == 0) {
      throw bad();
    }
    Param p;
    p.name = line.substr(0, open);
    const std::string dims = line.substr(open + 2, close - open - 2);
    try {
      size_t used = 0;
      const std::string offset = line.substr(close + 2);
      p.offset = std::stoll(offset, &used);
      if (used != offset.size() || p.offset < 0) throw bad();
      std::istringstream parts(dims);
      for (std::string d; std::getline(parts, d, ',');) {
        const int64_t v = std::stoll(d, &used);
        if (used != d.size() || v < 0) throw bad();
        p.shape.push_back(v);
        p.numel *= v;
      }
    } catch (const std::logic_error&) {  // stoll
      throw bad();
    }
    out.push_back(p);
  }
  return out;
}

std::string human_bytes(int64_t bytes) {
  static const char* const units[] = {"kB", "MB", "GB", "TB", "PB"};
  if (bytes < 1000) return fmt::format("{}B", bytes);
  double value = static_cast<double>(bytes) / 1000.0;
  size_t unit = 0;
  while (value >= 999.95 && unit + 1 < sizeof(units) / sizeof(units[0])) {
    value /= 1000.0;
    ++unit;
  }
  return fmt::format("{:.1f}{}", value, units[unit]);
}

int64_t directory_bytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    if (!item.is_regular_file(size_ec)) continue;
    const auto size = item.file_size(size_ec);
    if (!size_ec) total += static_cast<int64_t>(size);
  }
  return total;
}

void print_table(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 < row.size() ? fmt::format("{:<{}}  ", row[i], width[i]) : row[i];
    }
    fmt::print("{}\n", line);
  }
}

std::string relative_to(const std::string& message, const std::string& dir) {
  const std::string prefix = dir + "/";
  std::string out = message;
  for (size_t pos = out.find(prefix); pos != std::string::npos; pos = out.find(prefix, pos)) {
    out.erase(pos, prefix.size());
  }
  return out;
}

namespace {

template <class T>
std::vector<T> read_all(const H5Reader& reader, const std::string& name, int64_t count) {
  std::vector<T> values(static_cast<size_t>(count));
  reader.read(name, values.data(), count);
  return values;
}

}  // namespace

Dataset load_dataset(const H5Reader& reader, const std::string& name, const DatasetSum& sum) {
  Dataset d;
  d.sum = sum;
  d.shape = reader.shape(name);
  int64_t count = 1;
  for (const int64_t n : d.shape)
    count *= n;
  switch (reader.type(name)) {
    case H5Type::text:
      d.type = Dataset::Type::text;
      d.text = reader.read_string(name);
      break;
    case H5Type::f32:
      d.type = Dataset::Type::f32;
      d.f32 = read_all<float>(reader, name, count);
      break;
    case H5Type::f64:
      d.type = Dataset::Type::f64;
      d.f64 = read_all<double>(reader, name, count);
      break;
    case H5Type::i64:
      d.type = Dataset::Type::i64;
      d.i64 = read_all<int64_t>(reader, name, count);
      break;
    case H5Type::u8:
      d.type = Dataset::Type::u8;
      d.u8 = read_all<uint8_t>(reader, name, count);
      break;
    case H5Type::other:
      break;  // a type this tool does not read: compared by its sum only
  }
  if (count == 0 && d.type != Dataset::Type::text) d.type = Dataset::Type::empty;
  return d;
}

}  // namespace autoloco::ckpt_tool
