// Agreeing on "stop now" or "checkpoint now" without a blocking world-wide collective per step:
// each step starts a non-blocking OR-reduction of the local flags and completes the one started
// the step before, so every rank learns the same answer at the same step, one step late.
#pragma once

#include <mpi.h>

#include <memory>

namespace autoloco {

class StopAgreement {
 public:
  explicit StopAgreement(MPI_Comm comm);
  ~StopAgreement();
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  static constexpr unsigned kStop = 1;        // a stop signal arrived somewhere
  static constexpr unsigned kCheckpoint = 2;  // a timed checkpoint is due

  // Call once per step on every rank with the local flags. Returns the OR of every rank's flags
  // of the previous call (identical on every rank; 0 on the first call).
  unsigned poll(unsigned local_flags);

  // Completes any reduction in flight (call before the communicator goes away).
  void drain();
  // Leaves a reduction in flight behind without waiting, when the job is failing and its peers
  // may never join it: the buffers it targets and the communicator are leaked on purpose (MPI
  // may still write into them), and the job is to end with MPI_Abort.
  void abandon();

 private:
  // What the reduction in flight targets, on the heap so that abandon() can leave it to MPI.
  struct Flags {
    unsigned send = 0;
    unsigned recv = 0;
  };
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::unique_ptr<Flags> flags_ = std::make_unique<Flags>();
};

}  // namespace autoloco
