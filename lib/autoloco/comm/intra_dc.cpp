#include "autoloco/comm/intra_dc.hpp"

#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/util/error.hpp"
#ifdef AUTOLOCO_HAVE_CUDA
#include "autoloco/comm/nccl_communicator.hpp"
#endif

namespace autoloco {

std::unique_ptr<Communicator> make_intra_dc_communicator(MPI_Comm dc, int cuda_device) {
  int size = 1;
  MPI_Comm_size(dc, &size);
  if (cuda_device < 0 || size == 1) return std::make_unique<MpiCommunicator>(dc);
#ifdef AUTOLOCO_HAVE_CUDA
  return std::make_unique<NcclCommunicator>(dc, cuda_device);
#else
  throw CommError(
      "a dc of several GPU ranks needs NCCL, but this build has none: rebuild with CUDA and "
      "NCCL (AUTOLOCO_CUDA=ON), or use one rank per dc");
#endif
}

}  // namespace autoloco
