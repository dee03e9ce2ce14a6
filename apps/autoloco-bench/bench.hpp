// The benchmarks of autoloco-bench; each prints one JSON object on world rank 0.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/topology.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"

namespace autoloco::bench {

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  bool throughput = false;
  bool comm = false;
  bool ckpt = false;
  bool train = false;
  bool overlap = false;
  bool optimizer = false;
  bool hf_step = false;
  bool shard = false;
  // --shard: the topology.shard modes and model.recompute settings it compares (--modes,
  // --recompute: comma-separated); empty: every mode, and the config's recompute.
  std::vector<std::string> shard_modes;
  std::vector<std::string> recompute;
  // --hf-step: the interpreter with torch and transformers (empty: scripts/hf-env.sh's venv, as
  // autoloco-prepare --tokenizer hf finds it), and the kind of its torch.optim.AdamW: fused (the
  // default of transformers' Trainer with torch >= 2.8, "adamw_torch_fused"), foreach, or default
  // (torch's own choice: a per-parameter loop on the CPU).
  std::string python;
  std::string hf_adamw = "fused";
  // --profile (--hf-step): after the timed repeats, `steps` more of each side under LibTorch's
  // profiler, reported as each operator's self time per step (op_profile.hpp).
  bool profile = false;
  // --tokenize: the arguments after it go to autoloco-prepare --bench (tokenize.cpp).
  bool tokenize = false;
  std::vector<std::string> tokenize_args;
  int64_t steps = 30;
  int64_t warmup = 5;
  int64_t repeats = 3;
  int ranks_per_dc = 1;
  std::vector<int64_t> sizes = {1 << 16, 1 << 20, 1 << 22};  // floats
  int64_t iters = 10;
  // --link-gbps: the comm benchmark measures the real link of this many Gbit/s per host against
  // the WAN model instead (link.cpp); 0: off.
  double link_gbps = 0.0;
  int64_t mtu = 1500;                     // --mtu: the link's MTU, for its TCP goodput (link.cpp)
  int64_t ckpt_bytes = int64_t{1} << 30;  // --bytes
  std::string ckpt_dir;                   // --dir; empty: the system's temp directory
  // --peak-tflops: the accelerator's dense peak that MFU divides by. 790 is what a bf16 8192^3
  // matmul reached on this workplace's H200 (the datasheet's ~989 is not reached in practice).
  double peak_tflops = 790.0;
};

// Mean seconds of `op` over `iters` calls after `warmup`, the slowest rank's: every call starts
// together, after `prepare` (untimed).
template <class Prepare, class Op>
double mean_seconds(int64_t iters, int64_t warmup, MPI_Comm world, Prepare prepare, Op op) {
  double elapsed = 0.0;
  for (int64_t i = 0; i < warmup + iters; ++i) {
    prepare();
    MPI_Barrier(world);
    Timer t;
    op();
    if (i >= warmup) elapsed += t.seconds();
  }
  double mean = elapsed / static_cast<double>(iters);
  MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, world);
  return mean;
}

// Random tokens (the benchmarks measure compute, not what is learned) in dir/bench_000.bin;
// returns its path.
std::string write_synthetic_shard(const std::string& dir, int64_t vocab);

// The config of a one-process benchmark (one dc of one rank): the command line's, training on
// random tokens written into `dir` (with data.train and data.val set to that shard).
Config single_process_config(const Args& args, const std::string& dir);

// The "model" object of a benchmark's JSON: the config's sizes and the parameter count.
JsonObject model_json(const ModelConfig& model, int64_t parameters);

// Trainer inner step against a plain LibTorch loop, in one process.
int throughput(const Args& args);

// The Trainer's inner step against a transformers Llama-family training step of the same
// model (a Python helper process), taking turns, on the CPU.
int hf_step(const Args& args);

// The inner steps alone, beside a communication thread that waits patiently on the link, and
// beside one that spins in MPI_Wait, in one process.
int overlap(const Args& args);

// inner.optimizer muon against adamw on the same model, in one process: the optimizer step alone
// (with Newton-Schulz's share) and the whole inner step, taking turns.
int optimizer(const Args& args);

// The Trainer's whole loop (inner steps and rounds) on every rank of the world, under mpirun:
// inner step and round times, tokens/s, MFU on GPUs.
int train(const Args& args);

// topology.shard none, optimizer and gradients at every ranks_per_dc that divides the world,
// under mpirun: planned against measured memory per rank, inner step time, intra-dc bytes.
int shard(const Args& args);

// A temporary directory that every rank of MPI_COMM_WORLD names alike (rank 0's pid), for
// benchmark `tag`; and its removal at the end (every rank together, one per host removes it).
std::string shared_temp_dir(const std::string& tag);
void remove_shared_temp_dir(const std::string& dir, const HostRanks& host);

// Hierarchical outer all-reduce against a plain MPI_Allreduce of the same vector, under mpirun.
int comm(const Args& args);

// The "link" object of --comm --link-gbps: the inter-dc all-reduce on a real link against the
// WAN model with the measured latency (link.cpp).
JsonObject link_report(const Args& args, const Topology& topo, MpiCommunicator& world,
                       MpiCommunicator& intra, MpiCommunicator& inter);

// autoloco-prepare's SentencePiece encoding against spm_encode on the same model and text: runs
// autoloco-prepare --bench next to this executable (SentencePiece cannot be loaded beside
// Debian's LibTorch).
int tokenize(const Args& args);

// The checkpoint write/read path (HDF5, CRC-32, manifest, rename) against plain POSIX I/O of the
// same bytes on the same disk, in one process.
int ckpt(const Args& args);

}  // namespace autoloco::bench
