// The communication thread: jobs run on another thread, one at a time, their errors reach the
// main thread at wait(), and tearing it down cancels a job that waits on the link.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>

#include "autoloco/comm/comm_thread.hpp"
#include "autoloco/comm/patient_wait.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

TEST_CASE("comm thread: a job runs on the thread and is done at wait()", "[comm_thread]") {
  CommThread thread;
  CHECK_FALSE(thread.busy());
  std::thread::id ran_on;
  int value = 0;
  thread.start([&] {
    ran_on = std::this_thread::get_id();
    value = 42;
  });
  CHECK(thread.busy());
  thread.wait();
  CHECK_FALSE(thread.busy());
  CHECK(value == 42);
  CHECK(ran_on != std::this_thread::get_id());
  thread.wait();                   // nothing in flight: returns at once
  for (int i = 0; i < 100; ++i) {  // the same thread takes job after job
    thread.start([&] { ++value; });
    thread.wait();
  }
  CHECK(value == 142);
}

TEST_CASE("comm thread: a job's error is rethrown by wait() and the thread goes on",
          "[comm_thread]") {
  CommThread thread;
  thread.start([] { throw CommError("ring to rank 3 failed"); });
  CHECK_THROWS_WITH(thread.wait(), Catch::Contains("ring to rank 3 failed"));
  bool ran = false;
  thread.start([&] { ran = true; });
  thread.wait();
  CHECK(ran);
}

TEST_CASE("comm thread: a second job before wait() is an error", "[comm_thread]") {
  CommThread thread;
  thread.start([] {});
  CHECK_THROWS_AS(thread.start([] {}), CommError);
  thread.wait();
}

TEST_CASE("comm thread: tearing it down cancels a job that waits on the link", "[comm_thread]") {
  std::atomic<bool> cancelled{false};
  std::atomic<bool> sleeping{false};
  {
    auto thread = std::make_unique<CommThread>();
    const std::atomic<bool>* cancel = thread->cancel_flag();
    thread->start([cancel, &cancelled, &sleeping] {
      sleeping = true;
      try {
        sleep_cancellable(3600.0, cancel);  // an hour-long simulated link
      } catch (const CommError&) {
        cancelled = true;
        throw;
      }
    });
    while (!sleeping)  // a job not yet begun is dropped, not cancelled
      std::this_thread::yield();
    thread.reset();  // returns (joins) only because the sleep was cancelled
  }
  CHECK(cancelled);
}
