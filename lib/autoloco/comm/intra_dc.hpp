// Chooses the backend of the intra-dc gradient all-reduce: NCCL on device buffers when this is a
// CUDA build and the rank trains on a GPU, MPI on host buffers otherwise.
#pragma once

#include <mpi.h>

#include <memory>

#include "autoloco/comm/communicator.hpp"

namespace autoloco {

// `dc` spans the rank's datacenter; `cuda_device` is the rank's CUDA device index, or -1 on
// the CPU. Throws CommError when a GPU is asked for in a build without NCCL.
std::unique_ptr<Communicator> make_intra_dc_communicator(MPI_Comm dc, int cuda_device);

}  // namespace autoloco
