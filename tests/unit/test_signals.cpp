// The stop flag (util/signals): set by SIGINT/SIGTERM/SIGUSR1 in a handler, read by the main
// thread and the communication thread. The flag is a lock-free std::atomic<int> (a static_assert
// in signals.cpp); here, what a delivered signal leaves behind for either thread.
#include <catch2/catch.hpp>

#include <csignal>
#include <thread>

#include "autoloco/util/signals.hpp"

using namespace autoloco;

TEST_CASE("a stop signal sets the flag that every thread reads", "[signals]") {
  clear_stop_signal();
  install_stop_signal_handlers();
  REQUIRE(stop_signal_received() == 0);
  REQUIRE(std::raise(SIGUSR1) == 0);
  CHECK(stop_signal_received() == SIGUSR1);
  int seen = 0;
  std::thread reader([&] { seen = stop_signal_received(); });
  reader.join();
  CHECK(seen == SIGUSR1);
  // Another thread's request is the main thread's to see, too.
  std::thread([] { request_stop_for_test(SIGTERM); }).join();
  CHECK(stop_signal_received() == SIGTERM);
  clear_stop_signal();
  CHECK(stop_signal_received() == 0);
  for (const int s : {SIGINT, SIGTERM, SIGUSR1})
    std::signal(s, SIG_DFL);
}
