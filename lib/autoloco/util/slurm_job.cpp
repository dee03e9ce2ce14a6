// The Slurm job of a run, from the environment (see slurm_job.hpp).
#include "autoloco/util/slurm_job.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

namespace autoloco {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::optional<SlurmJob> slurm_job_from_env() {
  SlurmJob job;
  job.job_id = env("SLURM_JOB_ID");
  if (job.job_id.empty()) return std::nullopt;
  const std::string restarts = env("SLURM_RESTART_COUNT");
  char* end = nullptr;
  const long long count = std::strtoll(restarts.c_str(), &end, 10);
  job.segment = !restarts.empty() && *end == '\0' && count > 0 ? count : 0;
  job.nodelist = env("SLURM_JOB_NODELIST");
  job.step_id = env("SLURM_STEP_ID");
  return job;
}

std::string SlurmJob::describe() const {
  const std::string requeued = segment == 0   ? "its first run"
                               : segment == 1 ? "requeued once"
                                              : fmt::format("requeued {} times", segment);
  return fmt::format("slurm job {}, segment {} ({}), nodes {}", job_id, segment, requeued,
                     nodelist.empty() ? "?" : nodelist);
}

JsonObject SlurmJob::json() const {
  JsonObject out;
  out.add("job_id", job_id).add("segment", segment).add("nodelist", nodelist);
  if (!step_id.empty()) out.add("step_id", step_id);
  return out;
}

}  // namespace autoloco
