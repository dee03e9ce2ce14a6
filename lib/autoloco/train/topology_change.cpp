#include "autoloco/train/topology_change.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace autoloco {

std::string TopologyChange::describe() const {
  std::vector<std::string> parts;
  for (int d = 0; d < to_dcs; ++d) {
    parts.push_back(fmt::format("dc {} <- {}{}", d, source_dc(d), fresh(d) ? " (fresh data)" : ""));
  }
  std::string out = fmt::format("{} dc{} -> {}: {}", from_dcs, from_dcs == 1 ? "" : "s", to_dcs,
                                fmt::join(parts, ", "));
  if (to_dcs < from_dcs) {
    out += to_dcs + 1 == from_dcs ? fmt::format("; dc {} dropped", to_dcs)
                                  : fmt::format("; dcs {}-{} dropped", to_dcs, from_dcs - 1);
  }
  if (members_changed()) {
    out +=
        fmt::format("; ranks_per_dc {} -> {} (the sharded state re-split{})", from_members,
                    to_members, to_members > from_members ? ", the new members on fresh data" : "");
  }
  return out;
}

JsonObject TopologyChange::json() const {
  std::vector<int64_t> sources, fresh_dcs;
  for (int d = 0; d < to_dcs; ++d) {
    sources.push_back(source_dc(d));
    if (fresh(d)) fresh_dcs.push_back(d);
  }
  JsonObject o;
  o.add("from_dcs", from_dcs).add("to_dcs", to_dcs).add("source_dc", sources);
  o.add("fresh_streams", fresh_dcs);
  o.add("from_ranks_per_dc", from_members).add("to_ranks_per_dc", to_members);
  return o;
}

}  // namespace autoloco
