#include "autoloco/comm/patient_wait.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "autoloco/util/error.hpp"
#include "autoloco/util/mpi_check.hpp"

namespace autoloco {
namespace {

void throw_if_cancelled(const std::atomic<bool>* cancel) {
  if (cancel != nullptr && cancel->load(std::memory_order_acquire)) {
    throw CommError("the inter-dc sync was cancelled (the trainer is shutting down)");
  }
}

}  // namespace

void wait_all(MPI_Request* requests, int count, const WaitPolicy& policy) {
  if (!policy.patient) {
    AUTOLOCO_MPI(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
    return;
  }
  using Clock = std::chrono::steady_clock;
  constexpr auto kShortest = std::chrono::microseconds(20);
  constexpr auto kLongest = std::chrono::milliseconds(10);
  const auto start = Clock::now();
  while (true) {
    int done = 0;
    AUTOLOCO_MPI(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done != 0) return;
    throw_if_cancelled(policy.cancel);
    // An eighth of the wait so far: a message is seen at most ~12% (and 10 ms) late, and a long
    // wait wakes at most 100 times a second.
    const auto pause = std::clamp<Clock::duration>((Clock::now() - start) / 8, kShortest, kLongest);
    std::this_thread::sleep_for(pause);
  }
}

void sleep_cancellable(double seconds, const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  constexpr auto kSlice = std::chrono::milliseconds(10);
  for (auto now = Clock::now(); now < end; now = Clock::now()) {
    throw_if_cancelled(cancel);
    std::this_thread::sleep_for(std::min<Clock::duration>(kSlice, end - now));
  }
}

}  // namespace autoloco
