// Collecting the input files, cutting them into documents and splitting train/val.
#include "autoloco/data/documents.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "autoloco/data/prepare.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/splitmix.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

constexpr size_t kReadChunk = 1 << 20;
constexpr size_t kSniffBytes = 4096;

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// A uniform number in [0, 1) fixed by the document's name and the seed.
double split_score(const std::string& name, uint64_t seed) {
  const uint64_t h = splitmix64_mix(fnv1a(name) ^ splitmix64_at(seed, 0));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

bool inside(const fs::path& file, const fs::path& dir) {
  const fs::path rel = file.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

class Collector {
 public:
  Collector(const PrepareOptions& options, fs::path out_dir)
      : options_(options), out_dir_(std::move(out_dir)) {}

  void add_input(const std::string& input) {
    const fs::path root(input);
    if (fs::is_directory(root)) {
      walk(root);
    } else if (fs::is_regular_file(root)) {
      add(root, root.filename().generic_string());
    } else {
      throw DataError(fmt::format("input '{}' is not a file or directory; check the path", input));
    }
  }

  std::vector<InputFile> files;
  size_t skipped = 0;

 private:
  void walk(const fs::path& root) {
    std::vector<InputFile> found;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      if (!keep(entry.path())) {
        ++skipped;
        continue;
      }
      found.push_back({entry.path(), entry.path().lexically_relative(root).generic_string()});
    }
    // Directory order is arbitrary; sorting makes the shards identical on every machine.
    std::sort(found.begin(), found.end(),
              [](const InputFile& a, const InputFile& b) { return a.rel < b.rel; });
    for (auto& file : found)
      add(file.path, file.rel);
  }

  bool keep(const fs::path& path) const {
    const std::string name = path.filename().string();
    if (!options_.extensions.empty()) return has_suffix(name, options_.extensions);
    // Compressed json lines and parquet are binary: their names say what they are.
    return input_format_of(name) != InputFormat::text || looks_like_text(path.string());
  }

  void add(const fs::path& path, const std::string& rel) {
    const fs::path canonical = fs::weakly_canonical(path);
    // Never read our own output back in, and read a file reached twice only once.
    if (inside(canonical, out_dir_)) return;
    if (!seen_.insert(canonical.string()).second) return;
    files.push_back({path, rel, fs::file_size(path), input_format_of(path.filename().string())});
  }

  const PrepareOptions& options_;
  fs::path out_dir_;
  std::set<std::string> seen_;
};

[[noreturn]] void read_failed(const fs::path& path) {
  throw DataError(fmt::format("cannot read input '{}': {}; check permissions", path.string(),
                              std::strerror(errno)));
}

// Cuts one file into documents, reading it in windows so that memory stays at about `limit`.
void cut_file(size_t index, const InputFile& file, uint64_t limit, std::vector<Document>& out) {
  if (file.format != InputFormat::text) return;
  if (file.size <= limit) {
    out.push_back({index, 0, file.size, false});
    return;
  }
  std::ifstream in(file.path, std::ios::binary);
  if (!in) read_failed(file.path);
  std::string window;
  std::vector<char> chunk(kReadChunk);
  uint64_t start = 0;  // file offset of window[0]
  bool eof = false;
  while (true) {
    while (!eof && window.size() <= limit) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      window.append(chunk.data(), static_cast<size_t>(in.gcount()));
      eof = !in;
    }
    if (in.bad()) read_failed(file.path);
    if (window.size() <= limit) break;
    const auto [cut, dropped] = find_cut(window, limit);
    out.push_back({index, start, cut, false});
    const uint64_t consumed = cut + (dropped ? 1 : 0);
    window.erase(0, consumed);
    start += consumed;
  }
  if (!window.empty()) out.push_back({index, start, window.size(), false});
}

// The name a document's split score hashes: the file's for a whole file, so that whole-file
// corpora split exactly as before documents were cut.
std::string document_name(const DocumentPlan& plan, size_t i, size_t piece) {
  const auto& file = plan.files[plan.documents[i].file];
  const bool whole = plan.documents[i].offset == 0 && plan.documents[i].size == file.size;
  return whole ? file.rel : fmt::format("{}#{}", file.rel, piece);
}

void assign_splits(DocumentPlan& plan, const PrepareOptions& options) {
  auto& docs = plan.documents;
  std::vector<double> scores;
  size_t piece = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    piece = i > 0 && docs[i].file == docs[i - 1].file ? piece + 1 : 0;
    scores.push_back(split_score(document_name(plan, i, piece), options.seed));
    docs[i].val = scores.back() < options.val_fraction;
  }
  if (docs.size() < 2) return;
  const auto val_count =
      std::count_if(docs.begin(), docs.end(), [](const Document& d) { return d.val; });
  const auto lowest = std::min_element(scores.begin(), scores.end()) - scores.begin();
  const auto highest = std::max_element(scores.begin(), scores.end()) - scores.begin();
  // Small corpora: still evaluate on something, and still train on something.
  if (val_count == 0) docs[static_cast<size_t>(lowest)].val = true;
  if (static_cast<size_t>(val_count) == docs.size()) docs[static_cast<size_t>(highest)].val = false;
}

// The last index in [from, to] (to < text.size()) where `text` has a newline, preferring one
// that ends a blank line; npos when there is none.
size_t last_newline(std::string_view text, size_t from, size_t to, bool blank_line) {
  for (size_t i = to + 1; i-- > from;) {
    if (text[i] == '\n' && (!blank_line || (i > 0 && text[i - 1] == '\n'))) return i;
  }
  return std::string_view::npos;
}

}  // namespace

// Declared in prepare.hpp; defined here, beside its one caller, so that autoloco_text does not
// need autoloco_prepare's objects to link.
bool looks_like_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char head[kSniffBytes];
  in.read(head, sizeof(head));
  return std::memchr(head, 0, static_cast<size_t>(in.gcount())) == nullptr;
}

bool in_val_split(const std::string& name, uint64_t seed, double val_fraction) {
  return split_score(name, seed) < val_fraction;
}

bool has_suffix(const std::string& name, const std::vector<std::string>& suffixes) {
  for (const auto& s : suffixes) {
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      return true;
    }
  }
  return false;
}

uint64_t auto_document_bytes(size_t files, uint64_t bytes, double val_fraction) {
  // Less a hair, so that 20 / 0.05 is 400 and not 401 after rounding.
  const double wanted = std::ceil(kDocumentsPerValFraction / val_fraction - 1e-9);
  if (static_cast<double>(files) >= wanted) return 0;
  const auto size = static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) / wanted));
  return std::clamp(size, kMinDocumentBytes, kMaxDocumentBytes);
}

std::pair<uint64_t, bool> find_cut(std::string_view text, uint64_t limit) {
  const auto to = static_cast<size_t>(limit);  // text.size() > limit: text[to] exists
  const size_t from = to / 2;
  for (const bool blank_line : {true, false}) {
    const size_t at = last_newline(text, from, to, blank_line);
    if (at != std::string_view::npos && at > 0) return {at, true};
  }
  // No line end in reach (one very long line): cut where a UTF-8 character starts.
  size_t at = to;
  while (at > from && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80)
    --at;
  return {at > 0 ? at : to, false};
}

std::vector<std::pair<uint64_t, uint64_t>> cut_documents(std::string_view text, uint64_t limit) {
  std::vector<std::pair<uint64_t, uint64_t>> pieces;
  uint64_t start = 0;
  while (text.size() - start > limit) {
    const auto [cut, dropped] = find_cut(text.substr(start), limit);
    pieces.emplace_back(start, cut);
    start += cut + (dropped ? 1 : 0);
  }
  if (start < text.size() || pieces.empty()) pieces.emplace_back(start, text.size() - start);
  return pieces;
}

DocumentPlan plan_documents(const PrepareOptions& options, const fs::path& canonical_out_dir) {
  Collector collector(options, canonical_out_dir);
  for (const auto& input : options.inputs)
    collector.add_input(input);
  if (collector.files.empty()) {
    throw DataError(
        fmt::format("no input files found in {} ({} skipped by the filters); check "
                    "the paths or --ext",
                    fmt::join(options.inputs, ", "), collector.skipped));
  }
  DocumentPlan plan;
  plan.files = std::move(collector.files);
  plan.skipped_files = collector.skipped;
  uint64_t bytes = 0;
  size_t text_files = 0;
  for (const auto& file : plan.files) {
    if (file.format != InputFormat::text) continue;
    bytes += file.size;
    ++text_files;
  }
  plan.doc_bytes = options.doc_bytes;
  if (plan.doc_bytes == 0) {
    plan.doc_bytes =
        text_files == 0 ? 0 : auto_document_bytes(text_files, bytes, options.val_fraction);
    plan.whole_files = plan.doc_bytes == 0;
    if (plan.whole_files) plan.doc_bytes = kMaxDocumentBytes;
  } else {
    plan.whole_files = false;
  }
  for (size_t i = 0; i < plan.files.size(); ++i)
    cut_file(i, plan.files[i], plan.doc_bytes, plan.documents);
  assign_splits(plan, options);
  return plan;
}

}  // namespace autoloco
