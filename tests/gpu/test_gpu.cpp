// The CUDA paths (skipped where LibTorch sees too few GPUs): the NCCL communicator on device
// buffers, ddp inside a dc over NCCL, and DiLoCo on the GPU with the inter-dc traffic staged
// through pinned host memory and the outer state on the device.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include "../support/shared_corpus.hpp"
#include "autoloco/comm/nccl_communicator.hpp"

using namespace autoloco;
using test::identical_on_all_ranks;
using test::SharedCorpus;
using test::world_rank;

TEST_CASE("the NCCL communicator sums and gathers and broadcasts device buffers",
          "[np=2][gpus=2]") {
  const int rank = world_rank();
  const auto device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank));
  NcclCommunicator comm(MPI_COMM_WORLD, rank);
  torch::Tensor x = torch::full({1001}, static_cast<float>(rank + 1), device);
  comm.allreduce_sum(x.data_ptr<float>(), 1001);
  CHECK(torch::all(x == 3.0F).item<bool>());
  torch::Tensor gathered = torch::empty({2, 5}, device);
  const torch::Tensor mine = torch::full({5}, static_cast<float>(rank), device);
  comm.allgather(mine.data_ptr<float>(), gathered.data_ptr<float>(), 5, DType::f32);
  CHECK(gathered[1][4].item<float>() == 1.0F);
  torch::Tensor b = torch::full({7}, static_cast<float>(rank * 10), device);
  comm.broadcast(b.data_ptr<float>(), 7, DType::f32, 1);
  CHECK(b[0].item<float>() == 10.0F);
  comm.barrier();
}

TEST_CASE("one dc of 2 GPU ranks keeps its replicas identical over NCCL", "[np=2][gpus=2]") {
  const SharedCorpus corpus("gpu-dc");
  Config config = corpus.config();
  config.run.device = "cuda";
  Trainer trainer(config, MPI_COMM_WORLD, {false, false});
  for (int step = 1; step <= 5; ++step) {
    trainer.train_step();
    INFO("after step " << step);
    REQUIRE(identical_on_all_ranks(trainer.params().values().cpu()));
  }
}

TEST_CASE("diloco on the GPU follows the CPU run and every dc holds the same anchor",
          "[np=2][gpus=1]") {
  const SharedCorpus corpus("gpu-diloco");
  Config cpu = corpus.config(1);  // 2 dcs of 1 rank, sharing the GPU
  cpu.interval.H = 4;
  cpu.run.steps = 12;
  Config gpu = cpu;
  gpu.run.device = "cuda";
  gpu.outer.state_device = "device";
  Trainer on_cpu(cpu, MPI_COMM_WORLD, {false, false});
  Trainer on_gpu(gpu, MPI_COMM_WORLD, {false, false});
  for (int step = 1; step <= 12; ++step) {
    on_cpu.train_step();
    const StepResult r = on_gpu.train_step();
    if (r.round) {
      INFO("round " << r.round->round);
      REQUIRE(on_gpu.anchor().is_cuda());
      REQUIRE(identical_on_all_ranks(on_gpu.anchor().cpu()));
    }
  }
  const double diff = (on_gpu.anchor().cpu() - on_cpu.anchor()).abs().max().item<double>();
  INFO("GPU and CPU anchors differ by " << diff);
  // Different kernels round differently; a wrong staging or sign would differ by ~1e-1.
  CHECK(diff < 1e-2);
}
