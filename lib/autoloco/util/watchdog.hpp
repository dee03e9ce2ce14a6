// The watchdog on every collective (comm.timeout_s, docs/faults.md), in util/ beside the MPI
// checks that hold a Watch around every call (util/mpi_check.hpp), below the comm layer.
// Open MPI 4.1 cannot go on without a lost rank, and a stopped or cut-off rank leaves its peers
// waiting in their next collective for as long as the allocation lasts. So each wait is
// watched: a thread that waits in a collective holds a Watch (AUTOLOCO_MPI holds one around
// every MPI call, and the trainer names the larger operations), and a thread of the watchdog's
// own checks the watched threads every timeout / 16 (at least every second). A wait past its
// bound gets one message naming what waited, for how long, at which round and step, and on
// whom, and the expiry handler ends the job (MPI_Abort in autoloco-train). Watches cost a lock
// of an uncontended mutex; with no watchdog running they cost nothing.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace autoloco {

// Where the calling thread is in the run, for the message: the trainer sets it on the main
// thread every step, a sync job on the communication thread. -1: unknown (not printed).
void set_watch_position(int64_t round, int64_t step);
// Names the calling thread in the message ("main thread", "communication thread").
void set_watch_thread_name(const char* name);

// What the calling thread waits on now, inside its watches: the phase, the peers ("ring
// reduce-scatter step 2 of 3: receiving from world rank 4"). Kept until the outermost Watch
// ends; ignored outside watches.
void set_watch_detail(std::string text);

// A bound of a watch's own in place of the watchdog's timeout, for waits that legitimately take
// longer than any collective should (a checkpoint's write or a resume's read): its seconds and
// the config key that sets them, which the message names.
struct WatchBound {
  double seconds = 0.0;
  const char* key = "comm.timeout_s";
};

// The calling thread waits in `what` (a string literal) until the Watch is destroyed. Watches
// nest: the timer runs from the outermost, whose `what` the message names; the innermost still
// open names the call it is in. A wait is over its bound when it has run past the largest bound
// of its open watches (the watchdog's timeout for those without one of their own).
class Watch {
 public:
  explicit Watch(const char* what);
  Watch(const char* what, WatchBound bound);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  bool active_;
};

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once, on the watchdog's thread, with the message of the first expired wait.
  using Handler = std::function<void(const std::string& message)>;

  static Watchdog& instance();

  // Watches from now on with `timeout_s` (> 0); `with_thread` false leaves the checks to the
  // caller (tests drive check() with chosen times).
  void start(double timeout_s, Handler on_expiry, bool with_thread = true);
  // Stops watching and joins the thread. Idempotent.
  void stop();
  bool running() const;
  double timeout_s() const;

  // Looks at every watched thread at `now`; the first wait past the timeout gets the handler
  // (once per start) and its message is returned.
  std::optional<std::string> check(Clock::time_point now);

  // One watched thread's state (watchdog.cpp).
  struct Slot;
  // The calling thread's slot, enrolled on first use.
  static Slot& this_thread();

 private:
  Watchdog() = default;
  void loop();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::weak_ptr<Slot>> slots_;
  Handler handler_;
  double timeout_s_ = 0.0;
  bool fired_ = false;
  bool quit_ = false;
  std::thread thread_;
};

// The exit code of a job ended by the watchdog (that of coreutils' timeout).
constexpr int kWatchdogExitCode = 124;

// The handler of a training job: prints the message as this rank's error and aborts every rank
// of `comm` with kWatchdogExitCode.
Watchdog::Handler abort_job(MPI_Comm comm);

// Runs Watchdog::instance().stop() when it goes out of scope (the watchdog of one run).
class WatchdogRun {
 public:
  WatchdogRun(double timeout_s, Watchdog::Handler on_expiry);
  ~WatchdogRun();
  WatchdogRun(const WatchdogRun&) = delete;
  WatchdogRun& operator=(const WatchdogRun&) = delete;
};

}  // namespace autoloco
