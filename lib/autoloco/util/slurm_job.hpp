// The Slurm job a run is part of, from the environment Slurm gives a batch job and its steps:
// the job id, the segment (how many times the job was requeued: SLURM_RESTART_COUNT) and the
// nodes. The start log, segments.jsonl and summary.json record it, so that a requeued run's
// history can be read from its run directory (docs/checkpoints.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "autoloco/util/json.hpp"

namespace autoloco {

struct SlurmJob {
  std::string job_id;    // SLURM_JOB_ID
  int64_t segment = 0;   // SLURM_RESTART_COUNT: 0 for the first run of the job
  std::string nodelist;  // SLURM_JOB_NODELIST, e.g. "lab-h[0-3]"
  std::string step_id;   // SLURM_STEP_ID under srun; empty in the batch shell (mpirun)

  // "slurm job 42, segment 1 (requeued once), nodes lab-h[0-1]"
  std::string describe() const;
  JsonObject json() const;
};

// nullopt outside Slurm (no SLURM_JOB_ID). A malformed SLURM_RESTART_COUNT counts as 0.
std::optional<SlurmJob> slurm_job_from_env();

}  // namespace autoloco
