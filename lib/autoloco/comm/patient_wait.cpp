#include "autoloco/comm/patient_wait.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/mpi_check.hpp"

namespace autoloco {
namespace {

bool cancelled(const std::atomic<bool>* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_acquire);
}

void throw_if_cancelled(const std::atomic<bool>* cancel) {
  if (cancelled(cancel)) {
    throw CommError("the inter-dc sync was cancelled (the trainer is shutting down)");
  }
}

// A cancelled wait must not return while MPI may still write into (or read from) the buffers
// that its requests target: their owners free them as the error unwinds. A receive that no send
// has matched is withdrawn by MPI_Cancel; a send, a receive already under way or a collective
// can only complete. They get a moment to; past it the job is ended here, before any buffer is
// freed.
void withdraw(MPI_Request* requests, int count, RequestKind kind) {
  for (int i = 0; kind == RequestKind::point_to_point && i < count; ++i) {
    if (requests[i] != MPI_REQUEST_NULL) MPI_Cancel(&requests[i]);
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (true) {
    int done = 0;
    MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (done != 0) return;
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  log::error(
      "the inter-dc sync was cancelled with messages in flight that MPI could not withdraw; "
      "ending the job so that they cannot land in freed memory");
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

void wait_all(MPI_Request* requests, int count, const WaitPolicy& policy, RequestKind kind) {
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
    if (cancelled(policy.cancel)) {
      withdraw(requests, count, kind);
      throw_if_cancelled(policy.cancel);
    }
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
