#include "autoloco/comm/stop_agreement.hpp"

#include "autoloco/comm/watchdog.hpp"
#include "autoloco/util/mpi_check.hpp"

namespace autoloco {

StopAgreement::StopAgreement(MPI_Comm comm) {
  AUTOLOCO_MPI(MPI_Comm_dup(comm, &comm_));
}

StopAgreement::~StopAgreement() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  MPI_Comm_free(&comm_);
}

unsigned StopAgreement::poll(unsigned local_flags) {
  unsigned agreed = 0;
  if (request_ != MPI_REQUEST_NULL) {
    // Every rank takes part: one that never reaches its next step holds up all.
    const Watch watch("the stop agreement");
    set_watch_detail("the OR of every rank's flags, started a step before");
    AUTOLOCO_MPI(MPI_Wait(&request_, MPI_STATUS_IGNORE));
    agreed = recv_;
  }
  send_ = local_flags;
  AUTOLOCO_MPI(MPI_Iallreduce(&send_, &recv_, 1, MPI_UNSIGNED, MPI_BOR, comm_, &request_));
  return agreed;
}

void StopAgreement::drain() {
  if (request_ != MPI_REQUEST_NULL) AUTOLOCO_MPI(MPI_Wait(&request_, MPI_STATUS_IGNORE));
}

}  // namespace autoloco
