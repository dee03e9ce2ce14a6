// Test support: waiting for what a test's processes do. A test must fail for a wrong result,
// never for a slow machine, so a wait has no deadline of its own: it ends when its event
// happens, or as soon as the process that would make it happen is gone, so that a crash fails
// the test at once and the test can say what it waited for. A wait with nothing else to watch is
// bounded by the test's TestLimit, ctest's TIMEOUT less a margin: a test that ctest kills reports
// nothing and runs no destructor, leaving its job or its lab behind.
#pragma once

#include <chrono>
#include <thread>

namespace autoloco::test {

// ctest's TIMEOUT of the suites that drive the executables: e2e, slurm and net
// (tests/CMakeLists.txt; keep them equal).
inline constexpr int kDriverSuiteTimeoutS = 600;

// Polls `happened` until it holds (true) or `going_on` no longer does (false). `happened` is
// asked once more after `going_on` fails: a process may make its event and end between polls.
template <class Happened, class GoingOn>
bool wait_until(Happened&& happened, GoingOn&& going_on,
                std::chrono::milliseconds period = std::chrono::milliseconds(100)) {
  while (!happened()) {
    if (!going_on()) return happened();
    std::this_thread::sleep_for(period);
  }
  return true;
}

// The time a test may spend waiting: ctest's TIMEOUT counted from when the test makes this, less
// `margin_s` in which the test still reports what it saw and cleans up. Make it first thing.
class TestLimit {
 public:
  explicit TestLimit(int ctest_timeout_s = kDriverSuiteTimeoutS, int margin_s = 60)
      : end_(std::chrono::steady_clock::now() + std::chrono::seconds(ctest_timeout_s - margin_s)) {}
  bool time_left() const { return std::chrono::steady_clock::now() < end_; }

 private:
  std::chrono::steady_clock::time_point end_;
};

}  // namespace autoloco::test
