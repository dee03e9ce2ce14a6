// Which elements of a flat buffer each member of a dc keeps when its state is sharded
// (topology.shard, ZeRO): member m keeps shard m, elements [m S, min(n, (m + 1) S)) with
// S = ceil(n / R). The same split as the hierarchical outer all-reduce's, so the inter-dc
// all-reduce of a sharded pseudo-gradient needs no gather; the last shards of a buffer that R
// does not divide are shorter (or empty), and a collective pads them to S where it needs
// equal lengths.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace autoloco {

struct ShardSpan {
  int64_t numel = 0;  // of the whole buffer
  int members = 1;
  int member = 0;

  ShardSpan() = default;
  ShardSpan(int64_t numel_, int members_, int member_)
      : numel(numel_), members(members_), member(member_) {}

  // Every shard's padded length.
  int64_t size() const { return members > 0 ? (numel + members - 1) / members : 0; }
  int64_t begin_of(int m) const { return std::min(numel, size() * m); }
  int64_t count_of(int m) const { return std::min(numel, begin_of(m) + size()) - begin_of(m); }
  int64_t begin() const { return begin_of(member); }
  int64_t count() const { return count_of(member); }
  bool whole() const { return members == 1; }

  // The elements of [from, from + n) that each member keeps, in member order: the counts of a
  // reduce-scatter of that range.
  std::vector<size_t> split(int64_t from, int64_t n) const {
    std::vector<size_t> counts;
    for (int m = 0; m < members; ++m) {
      const int64_t lo = std::max(from, begin_of(m));
      const int64_t hi = std::min(from + n, begin_of(m) + count_of(m));
      counts.push_back(static_cast<size_t>(std::max<int64_t>(0, hi - lo)));
    }
    return counts;
  }
};

}  // namespace autoloco
