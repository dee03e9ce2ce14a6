// Monotonic wall-clock timing for throughput, ETA and time accounting.
#pragma once

#include <chrono>

namespace autoloco {

class Timer {
 public:
  Timer() : start_(Clock::now()) {}
  // Starts over, as if `elapsed_s` had already passed (a resumed run continues its clock).
  void reset(double elapsed_s = 0.0) {
    start_ = Clock::now() -
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(elapsed_s));
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

}  // namespace autoloco
