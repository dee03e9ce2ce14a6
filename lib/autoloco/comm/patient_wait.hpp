// Waiting for MPI requests without holding a core. Open MPI's blocking calls spin in its
// progress loop; on the communication thread that spin would take the core that the inner
// steps run on while the slow link works. A patient wait tests the requests and sleeps between
// tests for an eighth of the time waited so far (from 20 µs up to 10 ms): it sees a message at
// most ~12% (and 10 ms) late and wakes at most 100 times a second on a long wait; with the
// compute's OpenMP threads spinning on every core, waking every millisecond cost the inner steps
// 5% of their speed (autoloco-bench --overlap). A set cancel flag ends the wait with a CommError
// (the job is being torn down) once its requests are withdrawn or complete: a wait never returns
// with a request that could still write into its buffer (if MPI cannot withdraw one within 2 s,
// the job is ended with MPI_Abort instead).
#pragma once

#include <mpi.h>

#include <atomic>

namespace autoloco {

// A wait for a set of requests: patient (tests and sleeps, honours `cancel`) or, with
// `patient` false, MPI_Waitall.
struct WaitPolicy {
  bool patient = false;
  const std::atomic<bool>* cancel = nullptr;
};

// What the requests are: MPI can withdraw (MPI_Cancel) a point-to-point receive, but cancelling
// a non-blocking collective is erroneous; a cancelled wait on those can only let them complete.
enum class RequestKind { point_to_point, collective };

void wait_all(MPI_Request* requests, int count, const WaitPolicy& policy,
              RequestKind kind = RequestKind::point_to_point);

// Sleeps `seconds` in slices of at most 10 ms, throwing CommError when `cancel` is set.
void sleep_cancellable(double seconds, const std::atomic<bool>* cancel);

}  // namespace autoloco
