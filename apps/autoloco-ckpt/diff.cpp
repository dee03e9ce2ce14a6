// autoloco-ckpt diff: compares two checkpoints of the same model dataset by dataset. float32
// datasets of the model's size are split per parameter (max |a-b| and its ratio to max |a|);
// other datasets (counters, loop state, strings, RNG bytes) are listed when they differ. The
// vectors a sharded run may write as pieces of its rank files (the anchor, the outer state, a
// pending sum, the AdamW moments: ckpt/whole_vectors.hpp) are compared whole, under their home
// file, whatever layout each side has: checkpoints of one state in two shard modes compare equal.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include <type_traits>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/checkpoint_readers.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/ckpt/whole_vectors.hpp"
#include "autoloco/util/error.hpp"
#include "ckpt_tool.hpp"

namespace autoloco::ckpt_tool {
namespace {

// Keeps a ratio finite where max |a| is 0.
constexpr double kTiny = 1e-12;

struct Side {
  std::string path;
  Manifest manifest;
};

Side open_side(const std::string& arg) {
  const Target t = resolve(arg);
  if (!t.single) {
    throw UsageError(fmt::format(
        "diff compares two checkpoints, and '{}' is a directory of checkpoints: name one of them "
        "(e.g. {}/step_<N>; 'autoloco-ckpt ls {}' lists them)",
        arg, t.dir, arg));
  }
  const CheckpointInfo info = inspect_checkpoint(t.dir);
  if (!info.ok()) throw CheckpointError(fmt::format("cannot diff '{}': {}", arg, info.problem));
  return Side{t.dir, *info.manifest};
}

// An open file of one side. Every read is checked against the manifest's sums, so a damaged
// file fails instead of showing up as a difference.
class File {
 public:
  File(const Side& side, const std::string& name)
      : entry_(side.manifest.find(name)),
        reader_(side.path + "/" + name, entry_ ? &entry_->datasets : nullptr) {}
  const H5Reader& reader() const { return reader_; }
  Dataset load(const std::string& dataset) {
    DatasetSum sum;
    if (entry_ && entry_->datasets.count(dataset)) sum = entry_->datasets.at(dataset);
    return load_dataset(reader_, dataset, sum);
  }

 private:
  const ManifestFile* entry_;
  H5Reader reader_;
};

// global.h5 first, then dc_<d>.h5 and rank_<r>.h5 by number, then anything else by name.
bool file_order(const std::string& a, const std::string& b) {
  const auto key = [](const std::string& name) {
    static const std::regex numbered(R"(^(dc|rank)_([0-9]{1,9})\.h5$)");
    std::smatch m;
    if (name == kGlobalFile) return std::make_tuple(0, int64_t{0}, name);
    if (std::regex_match(name, m, numbered)) {
      return std::make_tuple(m[1].str() == "dc" ? 1 : 2,
                             static_cast<int64_t>(std::stoll(m[2].str())), name);
    }
    return std::make_tuple(3, int64_t{0}, name);
  };
  return key(a) < key(b);
}

std::string first_line_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(sa, la));
    const bool more_b = static_cast<bool>(std::getline(sb, lb));
    if (!more_a && !more_b) return "";
    if (!more_a) la = "(end)";
    if (!more_b) lb = "(end)";
    if (la != lb || !more_a || !more_b) {
      return fmt::format("line {}: '{}' | '{}'", line, la, lb);
    }
  }
}

const char* type_name(Dataset::Type t) {
  switch (t) {
    case Dataset::Type::f32:
      return "float32";
    case Dataset::Type::f64:
      return "float64";
    case Dataset::Type::i64:
      return "int64";
    case Dataset::Type::u8:
      return "uint8";
    case Dataset::Type::text:
      return "string";
    case Dataset::Type::empty:
      return "empty";
    case Dataset::Type::unknown:
      break;
  }
  return "other type";
}

template <class T>
std::string show_values(const std::vector<T>& v, const std::vector<int64_t>& shape) {
  if (shape.empty() && v.size() == 1) return fmt::format("{}", v.front());
  return fmt::format("[{}]", fmt::join(v, ", "));
}

// Equal values; NaN equals NaN (a loss that was never measured is NaN on both sides).
template <class T>
bool same(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) && std::isnan(y)) return true;
  }
  return x == y;
}

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](T x, T y) { return same(x, y); });
}

// How two numeric datasets differ, or "" when they do not.
template <class T>
std::string numeric_difference(const std::vector<T>& a, const std::vector<T>& b, const Dataset& da,
                               const Dataset& db) {
  if (same(a, b) && da.shape == db.shape) return "";
  if (a.size() <= 8 && b.size() <= 8) {
    return fmt::format("{} | {}", show_values(a, da.shape), show_values(b, db.shape));
  }
  if (a.size() != b.size()) return fmt::format("{} values | {} values", a.size(), b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i)
    differ += same(a[i], b[i]) ? 0 : 1;
  return fmt::format("{} of {} values differ", differ, a.size());
}

bool numeric(Dataset::Type t) {
  return t == Dataset::Type::f32 || t == Dataset::Type::f64 || t == Dataset::Type::i64 ||
         t == Dataset::Type::u8;
}

// Settles what the bytes cannot tell: zeros read the same as int64 and as float64 (they are
// taken as int64), and an empty dataset has no type. Each takes the other side's type.
void reconcile(Dataset& a, Dataset& b) {
  const auto zeros = [](const Dataset& d) {
    return d.type == Dataset::Type::i64 &&
           std::all_of(d.i64.begin(), d.i64.end(), [](int64_t v) { return v == 0; });
  };
  if (a.type == Dataset::Type::i64 && b.type == Dataset::Type::f64 && zeros(a)) {
    a.type = Dataset::Type::f64;
    a.f64.assign(a.i64.size(), 0.0);
  } else if (b.type == Dataset::Type::i64 && a.type == Dataset::Type::f64 && zeros(b)) {
    b.type = Dataset::Type::f64;
    b.f64.assign(b.i64.size(), 0.0);
  } else if (a.type == Dataset::Type::empty && numeric(b.type)) {
    a.type = b.type;
  } else if (b.type == Dataset::Type::empty && numeric(a.type)) {
    b.type = a.type;
  }
}

std::string other_difference(const Dataset& a, const Dataset& b) {
  if (a.type != b.type) {
    return fmt::format("type differs: {} | {}", type_name(a.type), type_name(b.type));
  }
  switch (a.type) {
    case Dataset::Type::f64:
      return numeric_difference(a.f64, b.f64, a, b);
    case Dataset::Type::i64:
      return numeric_difference(a.i64, b.i64, a, b);
    case Dataset::Type::u8:
      return numeric_difference(a.u8, b.u8, a, b);
    case Dataset::Type::text:
      if (a.text == b.text) return "";
      if (a.text.size() <= 60 && b.text.size() <= 60 && a.text.find('\n') == std::string::npos &&
          b.text.find('\n') == std::string::npos) {
        return fmt::format("'{}' | '{}'", a.text, b.text);
      }
      return "first difference at " + first_line_difference(a.text, b.text);
    case Dataset::Type::empty:
      return a.shape == b.shape ? "" : "shape differs";
    case Dataset::Type::f32:
    case Dataset::Type::unknown:
      break;
  }
  if (a.sum.bytes == b.sum.bytes && a.sum.crc == b.sum.crc) return "";
  return fmt::format("bytes differ (crc32 {:08x} | {:08x})", a.sum.crc, b.sum.crc);
}

struct Extent {
  double max_abs = 0.0;  // max |a-b|
  double max_a = 0.0;    // max |a|
};

Extent compare(const float* a, const float* b, int64_t n) {
  Extent e;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i];
    const double y = b[i];
    double d = 0.0;
    if (!(x == y) && !(std::isnan(x) && std::isnan(y))) {
      d = std::fabs(x - y);
      if (std::isnan(d)) d = std::numeric_limits<double>::infinity();  // one side NaN
    }
    e.max_abs = std::max(e.max_abs, d);
    if (!std::isnan(x)) e.max_a = std::max(e.max_a, std::fabs(x));
  }
  return e;
}

struct ParamRow {
  std::string file, dataset, param;
  Extent extent;
};

struct Report {
  std::vector<ParamRow> rows;                               // every (file, dataset, parameter)
  std::vector<std::pair<std::string, std::string>> floats;  // "file:dataset", summary
  std::vector<std::pair<std::string, std::string>> others;  // "file:dataset", difference
  std::vector<std::string> only_a, only_b;
  int float_identical = 0;
  int other_identical = 0;
  int differing = 0;
};

void compare_floats(const std::string& file, const std::string& name, const Dataset& a,
                    const Dataset& b, const std::vector<Param>& params, int64_t numel,
                    Report& report) {
  const std::string key = file + ":" + name;
  if (a.f32.size() != b.f32.size()) {
    report.floats.emplace_back(
        key, fmt::format("length differs: {} | {} values", a.f32.size(), b.f32.size()));
    ++report.differing;
    return;
  }
  const auto n = static_cast<int64_t>(a.f32.size());
  std::vector<ParamRow> rows;
  if (n == numel && !params.empty()) {
    for (const Param& p : params) {
      if (p.offset + p.numel > n) continue;
      rows.push_back(
          {file, name, p.name, compare(a.f32.data() + p.offset, b.f32.data() + p.offset, p.numel)});
    }
  } else {
    rows.push_back(
        {file, name, fmt::format("(all {} values)", n), compare(a.f32.data(), b.f32.data(), n)});
  }
  const auto worst = std::max_element(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    return x.extent.max_abs < y.extent.max_abs;
  });
  if (worst == rows.end() || worst->extent.max_abs == 0.0) {
    report.floats.emplace_back(key, "identical");
    ++report.float_identical;
  } else {
    const auto differ = std::count_if(rows.begin(), rows.end(),
                                      [](const ParamRow& r) { return r.extent.max_abs > 0.0; });
    report.floats.emplace_back(
        key, fmt::format("max |a-b| {:.4e} in {} ({} of {} parameters differ)",
                         worst->extent.max_abs, worst->param, differ, rows.size()));
    ++report.differing;
  }
  report.rows.insert(report.rows.end(), rows.begin(), rows.end());
}

// The vectors of one side that a layout may split, each whole (read against the manifest's sums).
WholeVectors side_vectors(const Side& side) {
  CheckpointReaders files(side.path, side.manifest);
  return whole_vectors(files, side.manifest);
}

// Compares vector `key` of the two sides (whole_vectors: (home file, dataset)), or lists it as
// one side's own. Each is taken out of its map once compared.
void compare_vector(const std::pair<std::string, std::string>& key, WholeVectors& va,
                    WholeVectors& vb, const std::vector<Param>& params, int64_t numel,
                    Report& report) {
  const auto& [file, name] = key;
  const auto ia = va.find(key);
  const auto ib = vb.find(key);
  if (ib == vb.end()) {
    if (ia != va.end()) report.only_a.push_back(file + ":" + name);
  } else if (ia == va.end()) {
    report.only_b.push_back(file + ":" + name);
  } else {
    Dataset a, b;
    a.type = b.type = Dataset::Type::f32;
    a.f32 = std::move(ia->second);
    b.f32 = std::move(ib->second);
    a.shape = {static_cast<int64_t>(a.f32.size())};
    b.shape = {static_cast<int64_t>(b.f32.size())};
    compare_floats(file, name, a, b, params, numel, report);
  }
  if (ia != va.end()) va.erase(ia);
  if (ib != vb.end()) vb.erase(ib);
}

// The datasets of `file` on both sides, by name. The vectors whose home it is (`va`, `vb`) are
// compared whole in their place; their pieces, and the vectors themselves as this file stores
// them, are not compared dataset by dataset.
void compare_file(const Side& sa, const Side& sb, const std::string& file,
                  const std::vector<Param>& params, int64_t numel, WholeVectors& va,
                  WholeVectors& vb, Report& report) {
  File fa(sa, file);
  File fb(sb, file);
  const auto vector_part = [&](const std::string& name) {
    return part_of_vector(file, name, fa.reader()) || part_of_vector(file, name, fb.reader());
  };
  std::set<std::string> in_a, in_b, vectors;
  for (const std::string& name : fa.reader().datasets()) {
    if (!vector_part(name)) in_a.insert(name);
  }
  for (const std::string& name : fb.reader().datasets()) {
    if (!vector_part(name)) in_b.insert(name);
  }
  for (const WholeVectors* v : {&va, &vb}) {
    for (const auto& entry : *v) {
      if (entry.first.first == file) vectors.insert(entry.first.second);
    }
  }
  std::set<std::string> names = vectors;
  names.insert(in_a.begin(), in_a.end());
  names.insert(in_b.begin(), in_b.end());
  for (const std::string& name : names) {
    if (vectors.count(name)) {
      compare_vector({file, name}, va, vb, params, numel, report);
      continue;
    }
    if (!in_a.count(name)) {
      report.only_b.push_back(file + ":" + name);
      continue;
    }
    if (!in_b.count(name)) {
      report.only_a.push_back(file + ":" + name);
      continue;
    }
    Dataset a = fa.load(name);
    Dataset b = fb.load(name);
    reconcile(a, b);
    if (a.type == Dataset::Type::f32 && b.type == Dataset::Type::f32) {
      compare_floats(file, name, a, b, params, numel, report);
      continue;
    }
    const std::string difference = other_difference(a, b);
    if (difference.empty()) {
      ++report.other_identical;
    } else {
      report.others.emplace_back(file + ":" + name, difference);
      ++report.differing;
    }
  }
}

// Two key/text lists as aligned columns.
void print_pairs(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, text] : pairs)
    rows.push_back({key, text});
  print_table(rows, "  ");
}

std::string describe(const Side& s) {
  return fmt::format("{} (step {}, round {}, {}, {})", s.path, s.manifest.step, s.manifest.round,
                     s.manifest.reason, s.manifest.created);
}

}  // namespace

int run_diff(const std::vector<std::string>& argv) {
  const Args args = Args::parse(argv, {"--top"}, {});
  if (args.positional.size() != 2) throw UsageError("diff takes two checkpoints: A B");
  const int64_t top = args.has("--top") ? parse_count("--top", *args.value("--top")) : 20;
  const Side a = open_side(args.positional[0]);
  const Side b = open_side(args.positional[1]);

  // The model: the same parameter table on both sides, or nothing to compare.
  std::vector<Param> params;
  int64_t numel = 0;
  {
    File ga(a, kGlobalFile);
    File gb(b, kGlobalFile);
    const Dataset ta = ga.load("model/parameters");
    const Dataset tb = gb.load("model/parameters");
    if (ta.text != tb.text) {
      fmt::print(stderr,
                 "autoloco-ckpt: '{}' and '{}' hold different models (model/parameters, first "
                 "difference at {}): diff compares checkpoints of one model\n",
                 a.path, b.path, first_line_difference(ta.text, tb.text));
      return kExitModelsDiffer;
    }
    params = parse_parameters(ta.text, a.path + "/" + kGlobalFile);
    numel = ga.reader().read_int("model/numel");
  }
  fmt::print("A: {}\nB: {}\n", describe(a), describe(b));
  fmt::print("model: {} parameters, {} values, the same in both\n", params.size(), numel);

  std::vector<std::string> files;
  for (const ManifestFile& f : a.manifest.files)
    files.push_back(f.name);
  std::sort(files.begin(), files.end(), file_order);
  Report report;
  for (const ManifestFile& f : b.manifest.files) {
    if (!a.manifest.find(f.name)) report.only_b.push_back(f.name);
  }
  WholeVectors va = side_vectors(a);
  WholeVectors vb = side_vectors(b);
  for (const std::string& file : files) {
    if (!b.manifest.find(file)) {
      report.only_a.push_back(file);
      continue;
    }
    compare_file(a, b, file, params, numel, va, vb, report);
  }
  // The vectors whose home file only one side has (listed above), or neither.
  const auto listed = [](const std::vector<std::string>& only, const std::string& file) {
    return std::find(only.begin(), only.end(), file) != only.end();
  };
  std::set<std::pair<std::string, std::string>> rest;
  for (const WholeVectors* v : {&va, &vb}) {
    for (const auto& entry : *v) {
      if (!listed(report.only_a, entry.first.first) && !listed(report.only_b, entry.first.first)) {
        rest.insert(entry.first);
      }
    }
  }
  for (const auto& key : rest)
    compare_vector(key, va, vb, params, numel, report);

  std::vector<ParamRow> differing;
  std::copy_if(report.rows.begin(), report.rows.end(), std::back_inserter(differing),
               [](const ParamRow& r) { return r.extent.max_abs > 0.0; });
  std::stable_sort(differing.begin(), differing.end(), [](const auto& x, const auto& y) {
    return x.extent.max_abs > y.extent.max_abs;
  });
  if (!differing.empty() && top > 0) {
    fmt::print("\nlargest float32 differences (top {} of {} that differ):\n",
               std::min<int64_t>(top, static_cast<int64_t>(differing.size())), differing.size());
    std::vector<std::vector<std::string>> rows{
        {"file", "dataset", "parameter", "max|a-b|", "max|a-b|/max|a|"}};
    for (size_t i = 0; i < differing.size() && static_cast<int64_t>(i) < top; ++i) {
      const ParamRow& r = differing[i];
      rows.push_back({r.file, r.dataset, r.param, fmt::format("{:.4e}", r.extent.max_abs),
                      fmt::format("{:.4e}", r.extent.max_abs / (r.extent.max_a + kTiny))});
    }
    print_table(rows, "  ");
  }
  if (!report.floats.empty()) {
    fmt::print("\nfloat32 datasets:\n");
    print_pairs(report.floats);
  }
  fmt::print(
      "\nother datasets: {} identical{}\n", report.other_identical,
      report.others.empty() ? "" : fmt::format(", {} differ (A | B):", report.others.size()));
  print_pairs(report.others);
  if (!report.only_a.empty()) fmt::print("\nonly in A: {}\n", fmt::join(report.only_a, ", "));
  if (!report.only_b.empty()) fmt::print("\nonly in B: {}\n", fmt::join(report.only_b, ", "));
  if (report.differing == 0 && report.only_a.empty() && report.only_b.empty()) {
    fmt::print("\nthe checkpoints are identical\n");
  } else {
    fmt::print("\n{} of {} datasets differ; {} only in A, {} only in B\n", report.differing,
               report.differing + report.float_identical + report.other_identical,
               report.only_a.size(), report.only_b.size());
  }
  return 0;
}

}  // namespace autoloco::ckpt_tool
