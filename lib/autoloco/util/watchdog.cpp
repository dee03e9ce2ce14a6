#include "autoloco/util/watchdog.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <utility>

#include "autoloco/util/log.hpp"

namespace autoloco {
namespace {

// Read by every Watch: with no watchdog running a Watch touches nothing else.
std::atomic<bool> g_running{false};

}  // namespace

struct Watchdog::Slot {
  struct Open {
    const char* what;
    double bound_s;  // <= 0: the watchdog's timeout
    const char* key;
  };
  std::mutex mutex;
  std::vector<Open> open;   // the open watches, outermost first
  Clock::time_point since;  // when the outermost opened
  std::string detail;
  int64_t round = -1;
  int64_t step = -1;
  const char* thread = "a thread";
};

Watchdog::Slot& Watchdog::this_thread() {
  // The registry holds weak pointers: a thread that ends takes its slot with it.
  thread_local const std::shared_ptr<Slot> slot = [] {
    auto s = std::make_shared<Slot>();
    Watchdog& dog = instance();
    std::lock_guard<std::mutex> lock(dog.mutex_);
    dog.slots_.push_back(s);
    return s;
  }();
  return *slot;
}

void set_watch_position(int64_t round, int64_t step) {
  Watchdog::Slot& s = Watchdog::this_thread();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.round = round;
  s.step = step;
}

void set_watch_thread_name(const char* name) {
  Watchdog::Slot& s = Watchdog::this_thread();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.thread = name;
}

Watch::Watch(const char* what) : Watch(what, WatchBound{0.0, nullptr}) {}

Watch::Watch(const char* what, WatchBound bound)
    : active_(g_running.load(std::memory_order_relaxed)) {
  if (!active_) return;
  Watchdog::Slot& s = Watchdog::this_thread();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.open.empty()) {
    s.since = Watchdog::Clock::now();
    s.detail.clear();
  }
  s.open.push_back(Watchdog::Slot::Open{what, bound.seconds, bound.key});
}

Watch::~Watch() {
  if (!active_) return;
  Watchdog::Slot& s = Watchdog::this_thread();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Watches end in the reverse order of their making: this one is the last open.
  if (!s.open.empty()) s.open.pop_back();
}

void set_watch_detail(std::string text) {
  if (!g_running.load(std::memory_order_relaxed)) return;
  Watchdog::Slot& s = Watchdog::this_thread();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.open.empty()) s.detail = std::move(text);
}

Watchdog& Watchdog::instance() {
  static Watchdog dog;
  return dog;
}

void Watchdog::start(double timeout_s, Handler on_expiry, bool with_thread) {
  stop();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    timeout_s_ = timeout_s;
    handler_ = std::move(on_expiry);
    fired_ = false;
    quit_ = false;
  }
  g_running.store(true);
  if (with_thread) thread_ = std::thread([this] { loop(); });
}

void Watchdog::stop() {
  g_running.store(false);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Watchdog::running() const {
  return g_running.load();
}

double Watchdog::timeout_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_s_;
}

namespace {

// The bound of a slot's wait: the largest of its open watches' (the timeout for those without
// one), and the key that sets it.
std::pair<double, const char*> bound_of(const Watchdog::Slot& s, double timeout_s) {
  std::pair<double, const char*> bound{timeout_s, "comm.timeout_s"};
  for (const Watchdog::Slot::Open& o : s.open) {
    if (o.bound_s > bound.first) bound = {o.bound_s, o.key};
  }
  return bound;
}

std::string describe(const Watchdog::Slot& s, double waited, std::pair<double, const char*> bound) {
  std::string where;
  if (s.round >= 0) where += fmt::format(" of round {}", s.round);
  if (s.step >= 0) where += fmt::format(" at step {}", s.step);
  std::string on = s.detail;
  if (s.open.size() > 1) on += fmt::format("{}in {}", on.empty() ? "" : "; ", s.open.back().what);
  const std::string key = bound.second;
  const std::string hint = key == "comm.timeout_s"
                               ? "if the wait was legitimate (a slower link), raise comm.timeout_s"
                               : "if the wait was legitimate (slow storage), raise " + key;
  return fmt::format(
      "{}{} has waited {:.1f} s, past {} = {:g} ({}{}on the {}). A rank it waits for is "
      "stopped, dead or cut off: ending the job. Resume from the last checkpoint with --resume "
      "auto; {}",
      s.open.front().what, where, waited, key, bound.first, on, on.empty() ? "" : "; ", s.thread,
      hint);
}

}  // namespace

std::optional<std::string> Watchdog::check(Clock::time_point now) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (fired_ || timeout_s_ <= 0) return std::nullopt;
  std::optional<std::string> message;
  slots_.erase(std::remove_if(slots_.begin(), slots_.end(),
                              [](const std::weak_ptr<Slot>& w) { return w.expired(); }),
               slots_.end());
  for (const std::weak_ptr<Slot>& weak : slots_) {
    const std::shared_ptr<Slot> s = weak.lock();
    if (!s) continue;
    std::lock_guard<std::mutex> slot_lock(s->mutex);
    if (s->open.empty()) continue;
    const auto bound = bound_of(*s, timeout_s_);
    const double waited = std::chrono::duration<double>(now - s->since).count();
    if (waited <= bound.first) continue;
    message = describe(*s, waited, bound);
    break;
  }
  if (!message) return std::nullopt;
  fired_ = true;
  const Handler handler = handler_;
  lock.unlock();
  if (handler) handler(*message);
  return message;
}

void Watchdog::loop() {
  // Checks often enough to end a job within a few percent of the timeout, and at most once a
  // second.
  const auto period = std::chrono::duration<double>(std::clamp(timeout_s_ / 16, 0.05, 1.0));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!quit_) {
    wake_.wait_for(lock, period);
    if (quit_) break;
    lock.unlock();
    check(Clock::now());
    lock.lock();
  }
}

Watchdog::Handler abort_job(MPI_Comm comm) {
  return [comm](const std::string& message) {
    log::error("{}", message);
    std::fflush(stderr);
    // MPI_Abort needs the runtime; should that be gone too, SIGALRM ends the process.
    alarm(30);
    MPI_Abort(comm, kWatchdogExitCode);
  };
}

WatchdogRun::WatchdogRun(double timeout_s, Watchdog::Handler on_expiry) {
  if (timeout_s > 0) Watchdog::instance().start(timeout_s, std::move(on_expiry));
}

WatchdogRun::~WatchdogRun() {
  Watchdog::instance().stop();
}

}  // namespace autoloco
