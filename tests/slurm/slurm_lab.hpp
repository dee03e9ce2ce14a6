// Test support for the slurm suite: a Slurm lab of its own per test (scripts/slurm-lab.sh, taken
// down however the test ends), and a wait for a job's end that gives up after a bound, so that
// no test can hang.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "../support/run_files.hpp"

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
  // Waits for the job to end for good; false after `limit_s` seconds. Counts the requeues it saw
  // (a job that ran, pending again). A requeued job starts again by itself 10 s later (the lab's
  // cred_expire): bringing it forward with `scontrol update starttime=now` can start it within
  // the second in which its node revoked the old credential, and then it fails.
  bool wait_done(const std::string& job, int limit_s, int* requeues = nullptr) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    bool ran = false;
    while (std::chrono::steady_clock::now() < end) {
      const std::string s = state(job);
      if (s == "COMPLETED" || s == "CANCELLED" || s == "FAILED" || s == "TIMEOUT" ||
          s == "NODE_FAIL" || s == "OUT_OF_MEMORY" || s == "BOOT_FAIL" || s == "DEADLINE") {
        return true;
      }
      const bool pending = s == "PENDING" || s.rfind("REQUEUE", 0) == 0;
      if (pending && ran && requeues != nullptr) ++*requeues;
      if (pending) ran = false;
      if (s == "RUNNING") ran = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }

  // What Slurm says of the job and the ends of the lab's logs, for a failure's message.
  std::string diagnose(const std::string& job) const {
    return exec("scontrol show job " + job + "; tail -n 25 /run/slurmlab/" + name_ +
                "/slurmctld.log /run/slurmlab/" + name_ + "/slurmd-*.log")
        .text;
  }
  // Waits until no job is queued or running; false after `limit_s` seconds.
  bool wait_idle(int limit_s) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    while (std::chrono::steady_clock::now() < end) {
      if (exec("squeue -h -o %i").text.empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }

 private:
  static std::string script() { return std::string(AUTOLOCO_SOURCE_DIR) + "/scripts/slurm-lab.sh"; }
  std::string name_;
};

}  // namespace autoloco::test
