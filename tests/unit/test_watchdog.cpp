// The watchdog on collectives (util/watchdog.hpp), driven with chosen times: no test waits on
// the clock. The e2e tests (tests/e2e/test_faults.cpp) end real jobs with it.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "autoloco/util/watchdog.hpp"

using autoloco::set_watch_detail;
using autoloco::set_watch_position;
using autoloco::Watch;
using autoloco::Watchdog;
using namespace std::chrono_literals;

namespace {

// A watchdog without its thread for the test's scope; the handler's messages are kept.
struct ManualWatchdog {
  std::vector<std::string> fired;
  explicit ManualWatchdog(double timeout_s) {
    Watchdog::instance().start(
        timeout_s, [this](const std::string& m) { fired.push_back(m); }, /*with_thread=*/false);
  }
  ~ManualWatchdog() { Watchdog::instance().stop(); }
  std::optional<std::string> check_at(Watchdog::Clock::duration later) {
    return Watchdog::instance().check(Watchdog::Clock::now() + later);
  }
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("watchdog names a wait past the timeout once, with its round, step and peers",
          "[watchdog]") {
  ManualWatchdog dog(2.0);
  autoloco::set_watch_thread_name("main thread");
  set_watch_position(3, 17);
  {
    const Watch watch("the inter-dc all-reduce");
    set_watch_detail("ring all-gather step 1 of 3: receiving from world rank 4");
    CHECK_FALSE(dog.check_at(1s));
    CHECK(dog.fired.empty());
    const std::optional<std::string> m = dog.check_at(3s);
    REQUIRE(m);
    CHECK(contains(*m, "the inter-dc all-reduce of round 3 at step 17 has waited 3."));
    CHECK(contains(*m, "past comm.timeout_s = 2"));
    CHECK(contains(*m, "receiving from world rank 4"));
    CHECK(contains(*m, "on the main thread"));
    REQUIRE(dog.fired.size() == 1);
    CHECK(dog.fired[0] == *m);
    // Once: the job is being ended.
    CHECK_FALSE(dog.check_at(10s));
    CHECK(dog.fired.size() == 1);
  }
  set_watch_position(-1, -1);
}

TEST_CASE("watchdog times the outermost watch and names the innermost call", "[watchdog]") {
  ManualWatchdog dog(5.0);
  const Watch outer("the stop agreement");
  { const Watch inner("MPI_Wait(&request_, MPI_STATUS_IGNORE)"); }
  // A nested watch neither restarts the timer nor takes the name.
  const Watch again("MPI_Testall(...)");
  const std::optional<std::string> m = dog.check_at(6s);
  REQUIRE(m);
  CHECK(contains(*m, "the stop agreement has waited"));
  CHECK(contains(*m, "in MPI_Testall(...)"));
}

TEST_CASE("watchdog does not name a nested call that has returned", "[watchdog]") {
  ManualWatchdog dog(5.0);
  const Watch outer("the stop agreement");
  { const Watch inner("MPI_Wait(&request_, MPI_STATUS_IGNORE)"); }
  const std::optional<std::string> m = dog.check_at(6s);
  REQUIRE(m);
  CHECK(contains(*m, "the stop agreement has waited"));
  CHECK_FALSE(contains(*m, "MPI_Wait"));
}

TEST_CASE("a watch with a bound of its own waits past the timeout and names its key",
          "[watchdog]") {
  ManualWatchdog dog(2.0);
  {
    const Watch io("a checkpoint's write", autoloco::WatchBound{30.0, "ckpt.timeout_s"});
    // Collectives inside it take its bound: a slow writer is not a dead rank.
    const Watch inner("MPI_Allreduce(...)");
    CHECK_FALSE(dog.check_at(20s));
    const std::optional<std::string> m = dog.check_at(31s);
    REQUIRE(m);
    CHECK(contains(*m, "a checkpoint's write has waited 31."));
    CHECK(contains(*m, "past ckpt.timeout_s = 30"));
    CHECK(contains(*m, "in MPI_Allreduce(...)"));
    CHECK(contains(*m, "raise ckpt.timeout_s"));
  }
  // A bound shorter than the timeout does not shorten it.
  ManualWatchdog again(10.0);
  const Watch io("a checkpoint's write", autoloco::WatchBound{1.0, "ckpt.timeout_s"});
  CHECK_FALSE(again.check_at(5s));
  const std::optional<std::string> m = again.check_at(11s);
  REQUIRE(m);
  CHECK(contains(*m, "past comm.timeout_s = 10"));
}

TEST_CASE("watchdog leaves finished waits and unwatched threads alone", "[watchdog]") {
  ManualWatchdog dog(1.0);
  { const Watch watch("an MPI collective"); }
  CHECK_FALSE(dog.check_at(100s));
  // Detail outside a watch is dropped: the next wait does not inherit it.
  set_watch_detail("stale");
  const Watch watch("the evaluation's all-reduce");
  const std::optional<std::string> m = dog.check_at(2s);
  REQUIRE(m);
  CHECK_FALSE(contains(*m, "stale"));
}

TEST_CASE("watchdog sees a wait on another thread", "[watchdog]") {
  ManualWatchdog dog(1.0);
  std::promise<void> armed, release;
  std::thread other([&] {
    autoloco::set_watch_thread_name("communication thread");
    set_watch_position(8, 40);
    const Watch watch("the inter-dc all-reduce");
    armed.set_value();
    release.get_future().wait();
  });
  armed.get_future().wait();
  const std::optional<std::string> m = dog.check_at(2s);
  release.set_value();
  other.join();
  REQUIRE(m);
  CHECK(contains(*m, "of round 8 at step 40"));
  CHECK(contains(*m, "on the communication thread"));
}

TEST_CASE("watches cost nothing and report nothing without a running watchdog", "[watchdog]") {
  Watchdog::instance().stop();
  CHECK_FALSE(Watchdog::instance().running());
  const Watch watch("an MPI collective");
  // Started after the watch: that watch was never armed.
  ManualWatchdog dog(1.0);
  CHECK_FALSE(dog.check_at(100s));
}
