#include "autoloco/util/signals.hpp"

#include <atomic>
#include <csignal>

namespace autoloco {
namespace {

// Written by the handler, read by the main thread and the communication thread: an atomic, so
// that every thread sees the write (a volatile sig_atomic_t promises that only to the handler's
// own thread), and lock-free, which is what makes it safe to touch from a signal handler.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "the stop flag must be lock-free to be written from a signal handler");

extern "C" void on_stop_signal(int signal_number) {
  // An impatient second Ctrl-C means "now": fall back to the default action.
  if (signal_number == SIGINT && g_signal.load() == SIGINT) std::signal(SIGINT, SIG_DFL);
  g_signal.store(signal_number);
}

}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);
}

int stop_signal_received() {
  return g_signal.load();
}
void request_stop_for_test(int signal_number) {
  g_signal.store(signal_number);
}
void clear_stop_signal() {
  g_signal.store(0);
}

}  // namespace autoloco
