// The console progress line of rank 0: step/total, loss, lr, tokens/s, rounds and inter-dc bytes
// (with several dcs), ETA.
#pragma once

#include <cstdint>
#include <string>

namespace autoloco {

struct ProgressState {
  int64_t step = 0;  // steps done
  int64_t total = 0;
  double loss = 0.0;
  double lr = 0.0;
  double tokens_per_s = 0.0;
  double elapsed_s = 0.0;
  int dcs = 1;  // rounds and bytes are shown only with several dcs
  int64_t rounds = 0;
  int64_t inter_dc_bytes = 0;  // all dcs, so far
};

std::string format_progress(const ProgressState& s);

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

// "12.3k", "4.56M".
std::string format_si(double value);

}  // namespace autoloco
