// What one inter-dc collective puts on the link, for the WAN model (wan_link.hpp). A
// collective runs in phases in which every rank sends at once (a ring step; the scatter or the
// gather of the compressed all-to-all); a phase takes the latency plus the bytes of its busiest
// dc over the dc's bandwidth. Both collectives count the bytes they hand to MPI and can compute
// every rank's in advance, so the bytes charged are the bytes sent (tests assert it).
#pragma once

#include <cstdint>

namespace autoloco {

struct LinkTraffic {
  int64_t sent_bytes = 0;      // this rank's messages: values, scales, scalars
  int phases = 0;              // sequential phases
  int64_t critical_bytes = 0;  // sum over phases of the most bytes one rank sends in it
  int64_t all_bytes = 0;       // what every rank of the collective sends, together

  LinkTraffic& operator+=(const LinkTraffic& o) {
    sent_bytes += o.sent_bytes;
    all_bytes += o.all_bytes;
    phases += o.phases;
    critical_bytes += o.critical_bytes;
    return *this;
  }
};

}  // namespace autoloco
