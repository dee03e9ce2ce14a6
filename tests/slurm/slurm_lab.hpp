// Test support for the slurm suite: a Slurm lab of its own per test (scripts/slurm-lab.sh, taken
// down however the test ends), and waits on its jobs that end with what they wait for or with
// the job, never at a deadline of their own (../support/wait.hpp).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "../support/run_files.hpp"
#include "../support/wait.hpp"

namespace autoloco::test {

// Output (stdout and stderr) and exit status of a shell command.
struct Output {
  int rc = -1;
  std::string text;
};

inline Output shell(const std::string& command) {
  Output out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.text.append(buffer, n);
  const int status = ::pclose(pipe);
  out.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

// Make the lab first thing in a test: its waits may last until the test's ctest TIMEOUT, counted
// from the lab's making, less the time to take it down and say why.
class SlurmLab {
 public:
  explicit SlurmLab(int nodes, const std::string& tag)
      : name_("sl" + tag + std::to_string(::getpid() % 100000)) {
    const Output up = shell(script() + " up " + std::to_string(nodes) + " --name " + name_);
    INFO(up.text);
    REQUIRE(up.rc == 0);
  }
  ~SlurmLab() { shell(script() + " down --name " + name_); }
  SlurmLab(const SlurmLab&) = delete;
  SlurmLab& operator=(const SlurmLab&) = delete;

  const std::string& name() const { return name_; }
  // Runs `command` (a bash command line) on the lab's head node.
  Output exec(const std::string& command) const {
    return shell(script() + " exec --name " + name_ + " -- bash -c '" + command + "'");
  }
  // A field of `scontrol show job` ("JobState", "Reason"), or "" when Slurm does not know the
  // job (it keeps a finished one MinJobAge = 300 s).
  std::string job_field(const std::string& job, const std::string& field) const {
    const std::string s = exec("scontrol show job " + job).text;
    const size_t at = s.find(" " + field + "=");
    if (at == std::string::npos) return "";
    const size_t begin = at + field.size() + 2;
    return s.substr(begin, s.find_first_of(" \n", begin) - begin);
  }
  std::string state(const std::string& job) const { return job_field(job, "JobState"); }
  // A state Slurm leaves a job in for good (a requeued job is pending again instead).
  static bool is_end_state(const std::string& s) {
    for (const char* end : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
                            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}) {
      if (s == end) return true;
    }
    return false;
  }
  bool ended(const std::string& job) const { return is_end_state(state(job)); }
  // Whether squeue lists jobs (pending, running or completing), those `filter` picks (squeue's
  // options) or any. An error of squeue's reads as yes: a wait on it goes on.
  bool queued(const std::string& filter = "") const {
    return !exec("squeue -h -o %i " + filter).text.empty();
  }

  // Waits until `happened` holds; false once `going_on` no longer does (the job that would make it
  // has ended, say) or the test's time is spent.
  template <class Happened, class GoingOn>
  bool wait(Happened&& happened, GoingOn&& going_on) const {
    const auto live = [&] { return limit_.time_left() && going_on(); };
    return wait_until(happened, live, kPoll);
  }
  // Waits for the job to end for good; false only when the test's time is spent first. Then
  // `requeues` is how often Slurm requeued it (its Restarts, -1 when unknown): Slurm counts them,
  // where polls could miss a short wait in between. A requeued job starts again by itself 10 s
  // later (the lab's cred_expire): bringing it forward with `scontrol update starttime=now` can
  // start it within the second in which its node revoked the old credential, and then it fails.
  bool wait_done(const std::string& job, int* requeues = nullptr) const {
    const auto time_left = [&] { return limit_.time_left(); };
    const bool done = wait_until([&] { return ended(job); }, time_left, kPoll);
    if (requeues != nullptr) {
      const std::string restarts = job_field(job, "Restarts");
      *requeues = restarts.empty() ? -1 : std::stoi(restarts);
    }
    return done;
  }

  // What Slurm says of the job (of every job it knows, for "") and the ends of the lab's logs,
  // for a failure's message.
  std::string diagnose(const std::string& job) const {
    return exec("scontrol show job " + job + "; tail -n 25 /run/slurmlab/" + name_ +
                "/slurmctld.log /run/slurmlab/" + name_ + "/slurmd-*.log")
        .text;
  }
  // Waits until no job is queued or running; false only when the test's time is spent first.
  bool wait_idle() const {
    return wait_until([&] { return !queued(); }, [&] { return limit_.time_left(); }, kPoll);
  }

 private:
  static constexpr std::chrono::milliseconds kPoll{500};
  static std::string script() { return std::string(AUTOLOCO_SOURCE_DIR) + "/scripts/slurm-lab.sh"; }
  // ctest's TIMEOUT less a minute for `down` (it gives each daemon up to 10 s) and the report.
  TestLimit limit_;
  std::string name_;
};

// sbatch of the template (scripts/slurm/autoloco.sbatch) on the lab for the run `run` in `dir`:
// its run directory dir/runs/RUN, its log dir/RUN-<job>.out, one task per node and one CPU per
// task. `slurm` are sbatch's other options, `args` what follows the template (the config and
// its overrides), `env` more variables for it. Returns the job id.
inline std::string submit_template(const SlurmLab& lab, const std::string& dir,
                                   const std::string& run, const std::string& slurm,
                                   const std::string& args, const std::string& env = "") {
  const auto out = lab.exec("cd " + dir + " && REPO=" + std::string(AUTOLOCO_SOURCE_DIR) +
                            " TRAIN=" + AUTOLOCO_TRAIN_EXE + " RUN_NAME=" + run +
                            " OUT_DIR=" + dir + "/runs OMP_NUM_THREADS=1 " + env +
                            " sbatch --parsable --requeue --open-mode=append --output=" + dir +
                            "/" + run + "-%j.out --ntasks-per-node=1 --cpus-per-task=1 " + slurm +
                            " " + AUTOLOCO_SOURCE_DIR + "/scripts/slurm/autoloco.sbatch " + args);
  INFO(out.text);
  REQUIRE(out.rc == 0);
  std::string id = out.text;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' '))
    id.pop_back();
  return id;
}

}  // namespace autoloco::test
