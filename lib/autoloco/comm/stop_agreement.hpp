// Agreeing on "stop now" without a blocking world-wide collective per step: each step starts a
// non-blocking MAX-reduction of the local flag and completes the one started the step before,
// so every rank learns the same answer at the same step, one step late.
#pragma once

#include <mpi.h>

namespace autoloco {

class StopAgreement {
 public:
  explicit StopAgreement(MPI_Comm comm);
  ~StopAgreement();
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  // Call once per step on every rank with the local request. Returns true when the reduction
  // completed here says some rank asked to stop (identical on every rank).
  bool poll(bool local_request);

  // Completes any reduction in flight (call before the communicator goes away).
  void drain();

 private:
  MPI_Comm comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int send_ = 0;
  int recv_ = 0;
};

}  // namespace autoloco
