#include "autoloco/comm/stop_agreement.hpp"

#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {

StopAgreement::StopAgreement(MPI_Comm comm) {
  AUTOLOCO_MPI(MPI_Comm_dup(comm, &comm_));
}

StopAgreement::~StopAgreement() {
  if (comm_ == MPI_COMM_NULL) return;  // abandoned
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
    agreed = flags_->recv;
  }
  flags_->send = local_flags;
  AUTOLOCO_MPI(
      MPI_Iallreduce(&flags_->send, &flags_->recv, 1, MPI_UNSIGNED, MPI_BOR, comm_, &request_));
  return agreed;
}

void StopAgreement::drain() {
  if (request_ != MPI_REQUEST_NULL) AUTOLOCO_MPI(MPI_Wait(&request_, MPI_STATUS_IGNORE));
}

void StopAgreement::abandon() {
  if (request_ == MPI_REQUEST_NULL) return;
  static_cast<void>(flags_.release());
  request_ = MPI_REQUEST_NULL;
  comm_ = MPI_COMM_NULL;
}

}  // namespace autoloco
