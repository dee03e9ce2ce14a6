// The CUDA paths (skipped where LibTorch sees too few GPUs): the NCCL communicator on device
// buffers, ddp inside a dc over NCCL against the same dc over MPI on the CPU, DiLoCo on the GPU
// (fp32 and bf16 autocast, the inter-dc traffic staged through pinned host memory, the outer
// state on the device or the host) against the CPU run, full sharding over NCCL against the
// same over MPI, and a checkpoint written on the GPU that resumes there exactly.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/trainer.hpp"

#include <ATen/Context.h>
#include <mpi.h>
#include <catch2/catch.hpp>

#include <cstdlib>

#include "../support/resume_check.hpp"
#include "../support/shared_corpus.hpp"
#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/comm/nccl_communicator.hpp"

using namespace autoloco;
using test::check_same_state;
using test::identical_on_all_ranks;
using test::SharedCorpus;
using test::world_rank;

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu() - b.cpu()).abs().max().item<double>();
}

// 2 dcs of 1 rank on the one GPU, DiLoCo with H 4 for 12 steps: three rounds.
Config two_dcs(const SharedCorpus& corpus) {
  Config c = corpus.config(1);
  c.interval.H = 4;
  c.run.steps = 12;
  return c;
}

// Runs `a` and `b` in lockstep and returns the largest anchor difference after the last round,
// checking on the way that every rank holds the same GPU anchor. Also sums each run's losses.
double lockstep(const Config& a, const Config& b, double* loss_a, double* loss_b) {
  Trainer ta(a, MPI_COMM_WORLD, {false, false});
  Trainer tb(b, MPI_COMM_WORLD, {false, false});
  *loss_a = *loss_b = 0.0;
  for (int64_t step = 1; step <= a.run.steps; ++step) {
    *loss_a += ta.train_step().loss;
    const StepResult r = tb.train_step();
    *loss_b += r.loss;
    if (r.round) {
      INFO("round " << r.round->round);
      REQUIRE(identical_on_all_ranks(tb.anchor().cpu()));
    }
  }
  return max_abs_diff(ta.anchor(), tb.anchor());
}

}  // namespace

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

TEST_CASE("ddp inside a dc over NCCL gives the MPI result of the CPU", "[np=2][gpus=2]") {
  const SharedCorpus corpus("gpu-nccl-vs-mpi");
  Config cpu = corpus.config();  // one dc of 2 ranks, ddp
  cpu.run.steps = 6;
  Config gpu = cpu;
  gpu.run.device = "cuda";
  gpu.run.precision = "fp32";
  gpu.run.tf32 = false;
  double loss_cpu = 0.0, loss_gpu = 0.0;
  Trainer on_cpu(cpu, MPI_COMM_WORLD, {false, false});
  Trainer on_gpu(gpu, MPI_COMM_WORLD, {false, false});
  for (int step = 1; step <= 6; ++step) {
    loss_cpu += on_cpu.train_step().loss;
    loss_gpu += on_gpu.train_step().loss;
  }
  const double diff = max_abs_diff(on_gpu.params().values(), on_cpu.params().values());
  INFO("NCCL and MPI replicas differ by " << diff << "; summed losses " << loss_gpu << " vs "
                                          << loss_cpu);
  // fp32 kernels of two devices: rounding only (a missing or doubled all-reduce is ~1e-2).
  CHECK(diff < 1e-3);
  CHECK(std::abs(loss_gpu - loss_cpu) < 1e-3 * std::abs(loss_cpu));
}

// Stage 3 over NCCL (the units' gathers and reductions on the side stream, ordered by events;
// AdLoCo's all-to-all of the gradient pieces) against the same run on the CPU over MPI, whose
// match with the unsharded run the mpi tests check.
TEST_CASE("full sharding with recompute and AdLoCo over NCCL follows the CPU run over MPI",
          "[np=2][gpus=2]") {
  const SharedCorpus corpus("gpu-full");
  Config cpu = corpus.config();  // one dc of 2 ranks
  cpu.outer.method = "diloco";
  cpu.interval.H = 4;
  cpu.run.steps = 8;
  cpu.topology.shard = "full";
  cpu.model.recompute = "blocks";
  cpu.data.batch_size = 2;
  cpu.batch.controller = "adloco";
  cpu.batch.theta = 0.05;  // grows the batch every round
  cpu.batch.max_batch = 4;
  cpu.batch.max_micro_batch = 1;  // every step accumulates micro-batches
  validate(cpu);
  Config gpu = cpu;
  gpu.run.device = "cuda";
  gpu.run.precision = "fp32";
  gpu.run.tf32 = false;
  double loss_cpu = 0.0, loss_gpu = 0.0;
  const double diff = lockstep(cpu, gpu, &loss_cpu, &loss_gpu);
  INFO("GPU and CPU anchors differ by " << diff << "; summed losses " << loss_gpu << " vs "
                                        << loss_cpu);
  // fp32 kernels of two devices: rounding only (a unit's gradient lost or reduced twice, or a
  // reduction read before it landed, moves the anchor by ~1e-2).
  CHECK(diff < 1e-3);
  CHECK(std::abs(loss_gpu - loss_cpu) < 1e-3 * std::abs(loss_cpu));
}

TEST_CASE("diloco on the GPU in fp32 follows the CPU run and every dc holds the same anchor",
          "[np=2][gpus=1]") {
  const SharedCorpus corpus("gpu-diloco");
  const Config cpu = two_dcs(corpus);
  Config gpu = cpu;
  gpu.run.device = "cuda";
  gpu.run.precision = "fp32";
  gpu.run.tf32 = false;
  gpu.outer.state_device = "device";
  double loss_cpu = 0.0, loss_gpu = 0.0;
  const double diff = lockstep(cpu, gpu, &loss_cpu, &loss_gpu);
  INFO("GPU and CPU anchors differ by " << diff);
  // Different kernels round differently; a wrong staging or sign would differ by ~1e-1.
  CHECK(diff < 1e-2);
}

TEST_CASE("diloco on the GPU in bf16 autocast with the outer state on the host tracks the CPU run",
          "[np=2][gpus=1]") {
  const SharedCorpus corpus("gpu-diloco-bf16");
  const Config cpu = two_dcs(corpus);
  Config gpu = cpu;
  gpu.run.device = "cuda";
  gpu.run.precision = "bf16";
  gpu.outer.state_device = "cpu";  // the pinned host anchor
  double loss_cpu = 0.0, loss_gpu = 0.0;
  const double diff = lockstep(cpu, gpu, &loss_cpu, &loss_gpu);
  INFO("anchors differ by " << diff << "; summed losses " << loss_gpu << " (bf16) vs " << loss_cpu
                            << " (fp32 CPU)");
  // bf16 has 8 bits of mantissa: losses agree to ~0.5%; AdamW's normalised steps let weights
  // that got tiny gradients move differently, by at most ~lr per step.
  CHECK(std::abs(loss_gpu - loss_cpu) < 0.01 * std::abs(loss_cpu));
  CHECK(diff < 0.05);
}

TEST_CASE("a checkpoint written on the GPU resumes there exactly", "[np=2][gpus=1]") {
  // Ask cuBLAS and LibTorch for deterministic kernels: only then can two GPU runs agree bitwise.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  const SharedCorpus corpus("gpu-resume");
  auto config = [&](const std::string& name) {
    Config c = two_dcs(corpus);
    c.run.device = "cuda";
    c.run.name = name;
    c.run.log_every = 3;
    c.ckpt.every_minutes = 0;
    return c;
  };
  const Config ref = config("reference"), again = config("again"), cut = config("cut");
  test::run(ref);
  test::run(again);
  test::run(cut, "", 6);  // stops in the middle of the second round
  const TrainSummary rest = test::run(cut, "auto");
  CHECK(rest.steps == 12);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto final_of = [](const Config& c) {
    return test::run_dir(c) + "/checkpoints/" + checkpoint_name(12);
  };
  if (world_rank() != 0) return;
  const H5Reader a(final_of(ref) + "/" + kGlobalFile), b(final_of(again) + "/" + kGlobalFile);
  const H5Reader r(final_of(cut) + "/" + kGlobalFile);
  const auto anchor = [](const H5Reader& h) { return torch::tensor(h.read_f32("outer/anchor")); };
  const double noise = max_abs_diff(anchor(a), anchor(b));
  if (noise == 0.0) {
    // The GPU repeats itself bit for bit, so the resumed run must too.
    check_same_state(final_of(ref), final_of(cut));
  } else {
    WARN("two uninterrupted GPU runs differ by " << noise
                                                 << " (non-deterministic kernels): the resumed "
                                                    "run is held to that spread, not to bits");
    CHECK(max_abs_diff(anchor(a), anchor(r)) <= 4.0 * noise);
  }
}
