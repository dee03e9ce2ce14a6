// Test support: a command started in the background (a lighthouse, one dc's mpirun) that the test
// follows by its pid: whether it still runs, its exit code, and its end. A child the test did not
// wait for is killed and reaped when the object goes, on a failed REQUIRE too, so that no process
// outlives its test.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <optional>
#include <stdexcept>
#include <string>

extern char** environ;

namespace autoloco::test {

class ChildProcess {
 public:
  // Runs `command` with the shell, its output into `log`. The shell execs the command, so the pid
  // is the command's own (mpirun's, say) and a signal to it reaches what the test started.
  ChildProcess(const std::string& command, const std::string& log) {
    const std::string line = "exec " + command + " > " + log + " 2>&1";
    const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
      throw std::runtime_error("cannot start: " + command);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (!exit_code_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  int pid() const { return pid_; }

  // True while the process runs (it is reaped as soon as it is seen to have ended).
  bool running() {
    if (exit_code_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) exit_code_ = code_of(status);
    return !exit_code_;
  }

  void signal(int sig) const {
    if (!exit_code_) ::kill(pid_, sig);
  }

  // Blocks until the process ends; its exit code, or 128 + the signal that ended it.
  int wait() {
    if (!exit_code_) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exit_code_ = code_of(status);
    }
    return *exit_code_;
  }

 private:
  static int code_of(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

}  // namespace autoloco::test
