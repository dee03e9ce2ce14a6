// Which device a rank trains on, and making it the current one of every thread that touches it.
// CUDA work that names no device (c10's event and stream bookkeeping, allocator frees, a
// cudaEvent destroyed on a thread) goes to the thread's current device, GPU 0 unless set: on a
// node of 8 GPUs every rank would then hold a context on GPU 0 as well (about 0.5 GB each), and
// in exclusive-process mode the second such context fails. So the trainer sets the device before
// its first CUDA call, and the communication thread sets it when it starts.
#pragma once

#include <torch/torch.h>

namespace autoloco {

struct RunConfig;

// run.device: the CPU, or GPU local_rank mod the node's GPU count. Throws ConfigError when
// cuda is asked for and none is visible.
torch::Device pick_device(const RunConfig& run, int local_rank);

// Makes `device` the calling thread's current device (nothing for the CPU).
void make_device_current(torch::Device device);

}  // namespace autoloco
