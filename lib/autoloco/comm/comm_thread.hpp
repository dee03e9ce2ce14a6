// The communication thread of a rank (DESIGN.md, data flow with overlap): runs one job at a time
// (a round's inter-dc all-reduce) while the main thread keeps training. Idle, it sleeps on a
// condition variable; a job that waits on the network waits patiently (patient_wait.hpp), so
// the thread never takes the compute's core to spin. What the job touches is the job's: the
// main thread hands it buffers at start() and takes them back after wait().
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace autoloco {

class CommThread {
 public:
  // `on_start` runs first on the new thread (e.g. to make the rank's GPU its current device);
  // what it throws is what every job's wait() throws.
  explicit CommThread(std::function<void()> on_start = {});
  // Cancels a job still running (its patient waits throw) and joins the thread.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Hands `job` to the thread. At most one job at a time: call wait() before the next.
  void start(std::function<void()> job);
  // Blocks until the job has finished; rethrows what it threw. No-op when no job was started.
  void wait();
  // A job was started and not yet waited for.
  bool busy() const { return started_; }
  // Set when the thread is being torn down: jobs pass it to their waits.
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;  // a job or the end arrived
  std::condition_variable done_;  // the job finished
  std::function<void()> job_;
  bool has_job_ = false;
  bool finished_ = false;
  bool quit_ = false;
  bool started_ = false;  // main thread only
  std::exception_ptr error_;
  std::atomic<bool> cancel_{false};
  std::function<void()> on_start_;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace autoloco
