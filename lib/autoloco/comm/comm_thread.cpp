#include "autoloco/comm/comm_thread.hpp"

#include <utility>

#include "autoloco/util/error.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {

CommThread::CommThread(std::function<void()> on_start)
    : on_start_(std::move(on_start)), thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  cancel_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CommThread::start(std::function<void()> job) {
  if (started_) throw CommError("internal: a sync was started while another was in flight");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
    has_job_ = true;
    finished_ = false;
    error_ = nullptr;
  }
  started_ = true;
  wake_.notify_one();
}

void CommThread::wait() {
  if (!started_) return;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return finished_; });
    error = error_;
    job_ = nullptr;
  }
  started_ = false;
  if (error) std::rethrow_exception(error);
}

void CommThread::loop() {
  set_watch_thread_name("communication thread");
  std::exception_ptr start_error;
  try {
    if (on_start_) on_start_();
  } catch (...) {
    start_error = std::current_exception();
  }
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return has_job_ || quit_; });
      if (quit_) return;
      job = job_;
      has_job_ = false;
    }
    std::exception_ptr error = start_error;
    try {
      if (!error) job();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = error;
      finished_ = true;
    }
    done_.notify_one();
  }
}

}  // namespace autoloco
