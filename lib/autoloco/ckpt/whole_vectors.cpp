#include "autoloco/ckpt/whole_vectors.hpp"

#include <limits>
#include <regex>

#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/ckpt/layout.hpp"

namespace autoloco {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_rank_file(const std::string& file) {
  static const std::regex rank(R"(^rank_[0-9]{1,9}\.h5$)");
  return std::regex_match(file, rank);
}

const std::string kRangesTail = piece_ranges_name("");

}  // namespace

std::string vector_home(const std::string& dataset, int dc) {
  if (dataset.rfind("outer/", 0) == 0 || dataset == "sync/pending_sum") return kGlobalFile;
  if (ends_with(dataset, "adamw/exp_avg") || ends_with(dataset, "adamw/exp_avg_sq") ||
      ends_with(dataset, "replica/values")) {
    return dc_file(dc);
  }
  return "";
}

bool part_of_vector(const std::string& file, const std::string& dataset, const H5Reader& reader) {
  if (is_rank_file(file)) {
    const std::string vector = ends_with(dataset, kRangesTail)
                                   ? dataset.substr(0, dataset.size() - kRangesTail.size())
                                   : dataset;
    return reader.has(piece_ranges_name(vector)) && !vector_home(vector, 0).empty();
  }
  if (file == kGlobalFile) return vector_home(dataset, 0) == kGlobalFile;
  return !vector_home(dataset, 0).empty() && vector_home(dataset, 0) != kGlobalFile;
}

WholeVectors whole_vectors(CheckpointReaders& files, const Manifest& manifest) {
  WholeVectors out;
  // The pieces of each vector, by its home, from every rank file.
  std::map<std::pair<std::string, std::string>, std::vector<const H5Reader*>> pieces;
  for (const ManifestFile& f : manifest.files) {
    const H5Reader& reader = files.open(f.name);
    const bool rank = is_rank_file(f.name);
    const int dc = rank && reader.has("rank/dc") ? static_cast<int>(reader.read_int("rank/dc")) : 0;
    for (const std::string& dataset : reader.datasets()) {
      if (rank) {
        if (!ends_with(dataset, kRangesTail)) continue;
        const std::string vector = dataset.substr(0, dataset.size() - kRangesTail.size());
        const std::string home = vector_home(vector, dc);
        if (!home.empty()) pieces[{home, vector}].push_back(&reader);
      } else if (part_of_vector(f.name, dataset, reader)) {
        out[{f.name, dataset}] = reader.read_f32(dataset);
      }
    }
  }
  // The parameters' count sizes every vector but a pending sum (a fragment's): a vector whose
  // pieces end short of it is missing its tail.
  const H5Reader& global = files.open(kGlobalFile);
  const int64_t params = global.has("model/numel") ? global.read_int("model/numel") : -1;
  for (const auto& [key, readers] : pieces) {
    const bool sized = params >= 0 && key.second != "sync/pending_sum";
    FlatPieces vector(key.second, sized ? params : std::numeric_limits<int64_t>::max());
    for (const H5Reader* reader : readers)
      vector.add(*reader, {});
    // A pending sum's length is where its last piece ends; read_into finds a gap before it.
    const int64_t numel = sized ? params : vector.extent();
    std::vector<float> values(static_cast<size_t>(numel));
    vector.read_into(values.data(), {FlatRange{0, numel}});
    out[key] = std::move(values);
  }
  return out;
}

}  // namespace autoloco
