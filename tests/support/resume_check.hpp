// Helpers of the exact-resume tests: a run that stops or resumes, two checkpoints that hold the
// same state bit for bit, and two runs that wrote the same metrics and syncs lines, apart from
// what measures wall-clock time.
#pragma once

#include <mpi.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "autoloco/ckpt/checkpoint_readers.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/ckpt/manifest.hpp"
#include "autoloco/ckpt/whole_vectors.hpp"
#include "autoloco/train/trainer.hpp"

namespace autoloco::test {

// A whole run on MPI_COMM_WORLD without progress lines: `resume` as --resume, `stop_at` as a stop
// signal agreed at that step (-1: none).
inline TrainSummary run(const Config& c, const std::string& resume = "", int64_t stop_at = -1) {
  TrainerOptions o;
  o.print_progress = false;
  o.resume = resume;
  o.stop_at_step = stop_at;
  Trainer trainer(c, MPI_COMM_WORLD, o);
  return trainer.train();
}

inline std::string run_dir(const Config& c) {
  return c.run.out_dir + "/" + c.run.name;
}

// metrics.jsonl or syncs.jsonl without the fields that measure wall-clock time.
inline std::vector<std::string> lines_without_clock(const std::string& path) {
  static const std::regex clock(
      R"re(,"(elapsed_s|sim_time_s|tokens_per_s|round_s|eval_s|tasks_s)":[-0-9.eE+a-z]+)re");
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(std::regex_replace(line, clock, ""));
  return out;
}

// Datasets whose values legitimately differ between two runs of the same state: wall-clock,
// the run's own name and files, and why the checkpoint was taken.
inline bool clock_or_name(const std::string& dataset) {
  static const std::set<std::string> skipped = {"config",
                                                "reason",
                                                "clock/wall_s",
                                                "wan/wall_s",
                                                "round/start_compute_s",
                                                "fragments/start_compute_s",
                                                "run/metrics_bytes",
                                                "run/syncs_bytes",
                                                "sync/wait_s",
                                                "sync/exposed_link_s",
                                                "sync/pending_handed_at",
                                                "sync/pending_wall_s"};
  return skipped.count(dataset) > 0;
}

// Every dataset of checkpoint `a` equals `b`'s, bit for bit (by the manifests' CRC-32 of their
// bytes), and every sharded vector (anchor, outer and AdamW state) by value, assembled from its
// pieces where a sharded run wrote it in pieces: a checkpoint of one shard mode equals one of
// another. Rank 0 checks; the files are shared.
inline void check_same_state(const std::string& a, const std::string& b, int dcs = 2) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  const Manifest ma = read_manifest(a);
  const Manifest mb = read_manifest(b);
  REQUIRE(ma.step == mb.step);
  REQUIRE(ma.files.size() == mb.files.size());
  CheckpointReaders ra(a, ma), rb(b, mb);
  for (const ManifestFile& fa : ma.files) {
    const ManifestFile* fb = mb.find(fa.name);
    REQUIRE(fb != nullptr);
    const H5Reader& reader = ra.open(fa.name);
    for (const auto& [name, sum] : fa.datasets) {
      if (clock_or_name(name) || part_of_vector(fa.name, name, reader)) continue;
      INFO(fa.name << ": " << name);
      REQUIRE(fb->datasets.count(name) == 1);
      CHECK(fb->datasets.at(name).bytes == sum.bytes);
      CHECK(fb->datasets.at(name).crc == sum.crc);
    }
  }
  const WholeVectors va = whole_vectors(ra, ma);
  const WholeVectors vb = whole_vectors(rb, mb);
  CHECK(va.size() == vb.size());
  CHECK(va.count({kGlobalFile, "outer/anchor"}) == 1);
  for (const auto& [key, values] : va) {
    INFO(key.first << ": " << key.second);
    REQUIRE(vb.count(key) == 1);
    CHECK(vb.at(key) == values);
  }
  const H5Reader ga(a + "/" + kGlobalFile), gb(b + "/" + kGlobalFile);
  CHECK(ga.read_i64("counters/h_per_round") == gb.read_i64("counters/h_per_round"));
  // Each dc's replica, whole or in its members' pieces (topology.shard full), is among them.
  for (int dc = 0; dc < dcs; ++dc)
    CHECK(va.count({dc_file(dc), "replica/values"}) == 1);
}

// A resumed run `cut` ended as the uninterrupted `ref`: their checkpoints at `step` hold the same
// state, and metrics.jsonl and syncs.jsonl the same lines but for the clocks.
inline void check_same_run(const Config& ref, const Config& cut, int64_t step) {
  const std::string last = "/checkpoints/" + checkpoint_name(step);
  check_same_state(run_dir(ref) + last, run_dir(cut) + last);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  for (const char* file : {"/metrics.jsonl", "/syncs.jsonl"}) {
    INFO(file);
    CHECK(lines_without_clock(run_dir(ref) + file) == lines_without_clock(run_dir(cut) + file));
  }
}

}  // namespace autoloco::test
